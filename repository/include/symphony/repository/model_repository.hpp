// A model repository in Triton's layout, read into what Symphony serves.
//
// A repository is a folder of model folders, DIR/<model>/config.pbtxt beside
// numeric version folders DIR/<model>/<version>/model.pt. config.pbtxt is
// parsed against Triton's ModelConfig schema (repository/proto/model_config.proto),
// so any file Triton accepts parses; this unit then keeps what Symphony
// honours as a plain struct, refuses what it cannot honour with an error naming
// the field, and lists what it accepts but does not use. No libtorch, no
// server: the model files are found, not opened. What is read, honoured and
// refused: docs/repository.md.
//
//   Result<RepositoryModel> m = read_model_dir("models/resnet18");
//   if (!m.ok()) die(m.status().message());  // "models/resnet18/config.pbtxt:7:3: ..."
//   for (const ModelVersion& v : m->versions) load(v.model_path);
//
// Guarantees: no global state; the functions may run on any thread at once.
// Reading is done once per call (a changed repository is read again by
// calling again).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "symphony/status.hpp"
#include "symphony/tensor_spec.hpp"
#include "symphony/time.hpp"

namespace symphony::repository {

// The config's file name inside a model folder.
inline constexpr const char* kConfigFileName = "config.pbtxt";
// The model file of a version when the config names none (Triton's PyTorch default).
inline constexpr const char* kDefaultModelFileName = "model.pt";
// parameters { key: "symphony.slo_ms" value { string_value: "25" } }: the model's
// latency SLO in milliseconds (Triton has no SLO).
inline constexpr const char* kSloParameter = "symphony.slo_ms";
// The SLO of a model whose config has no symphony.slo_ms: serve's
// --default-slo-ms by default, the cluster's roles always.
inline constexpr Duration kDefaultSlo = Duration::milliseconds(100);
// Keys of `parameters` under this prefix are Symphony's; an unknown one refuses the model.
inline constexpr const char* kParameterPrefix = "symphony.";
// Triton's PyTorch backend parameters for TorchScript's executor ("true" or
// "false"): either false runs the simple executor, else either true the
// profiling one (server::ModelOptions::jit_profiling).
inline constexpr const char* kJitExecutorParameter = "ENABLE_JIT_EXECUTOR";
inline constexpr const char* kJitProfilingParameter = "ENABLE_JIT_PROFILING";

// One input or output of the config. The spec's shape is `dims`: beyond the
// batch dimension when max_batch_size > 0, the whole shape when it is 0; a
// dimension of -1 means any size (Triton's wildcard; TensorSpec::has_wildcard()).
struct RepositoryTensor {
  std::string name;
  TensorSpec spec;
  // reshape { shape: [...] }: the shape the model itself sees, when given.
  std::optional<std::vector<std::int64_t>> reshape;
  // An input's dims in the first model_warmup entry that names it: the
  // sample shape a wildcard input is warmed up and profiled at.
  std::optional<std::vector<std::int64_t>> warmup_dims;
};

// instance_group's kind. KIND_MODEL refuses the model, so it has no value here.
enum class InstanceKind : std::uint8_t {
  kAuto,  // GPUs when there are any, else the CPU (Triton's rule)
  kGpu,
  kCpu,
};

// One instance_group entry: `count` copies on each of `gpus` (every GPU when
// empty) for kGpu, `count` copies on the CPU for kCpu.
struct InstanceGroup {
  std::string name;
  InstanceKind kind = InstanceKind::kAuto;
  std::uint32_t count = 1;  // Triton's default when the config says 0 or nothing
  std::vector<std::int32_t> gpus;
};

// A dynamic_batching queue policy, Triton's ModelQueuePolicy, as read (its
// fields' defaults are Triton's). Used by `serve --policy triton`.
struct QueuePolicy {
  Duration timeout;                     // default_timeout_microseconds (0: none)
  bool delay = false;                   // timeout_action DELAY (false: REJECT)
  std::uint32_t max_queue_size = 0;     // 0: no bound
  bool allow_timeout_override = false;  // allow_timeout_override
  bool operator==(const QueuePolicy&) const = default;
};

// A version folder the policy chose and whose model file exists.
struct ModelVersion {
  std::int64_t version = 0;
  std::string dir;         // DIR/<model>/<version>
  std::string model_path;  // dir + "/" + (default_model_filename or model.pt)
};

// A version the policy chose that cannot be served, and why.
struct UnavailableVersion {
  std::int64_t version = 0;
  std::string reason;
};

// What Symphony serves of one model folder.
struct RepositoryModel {
  std::string name;  // the folder's name (the config's `name`, when given, must equal it)
  std::string dir;
  std::string config_path;
  // Chosen by version_policy, ascending, each with its model file. Never empty.
  std::vector<ModelVersion> versions;
  // Chosen by version_policy but without a model file (the others still serve).
  std::vector<UnavailableVersion> unavailable_versions;
  // 0: the model takes no batch dimension, each request runs alone.
  std::uint32_t max_batch_size = 0;
  std::vector<RepositoryTensor> inputs;
  std::vector<RepositoryTensor> outputs;
  // dynamic_batching.max_queue_delay_microseconds: the cap on how long a batch is deferred.
  std::optional<Duration> max_defer;
  // dynamic_batching.default_queue_policy.default_timeout_microseconds: the budget of
  // a request that brings none.
  std::optional<Duration> default_budget;
  // dynamic_batching.default_queue_policy.max_queue_size: the most requests queued.
  std::optional<std::uint32_t> max_queue_size;
  // dynamic_batching.default_queue_policy, whole, when the config has one,
  // and priority_queue_policy (Triton's level -> its policy): Triton's queue
  // policies, which `serve --policy triton` applies; otherwise
  // default_budget and max_queue_size above are what is used of them.
  std::optional<QueuePolicy> default_queue_policy;
  std::map<std::uint32_t, QueuePolicy> priority_queue_policy;
  // dynamic_batching.priority_levels and default_priority_level (0: unset).
  std::uint32_t priority_levels = 0;
  std::uint32_t default_priority_level = 0;
  // parameters["symphony.slo_ms"].
  std::optional<Duration> slo;
  // Empty: the config has no instance_group (Triton: one instance on each GPU, else the CPU).
  std::vector<InstanceGroup> instance_groups;
  // optimization.cuda.graphs when the config has optimization.cuda (true:
  // on, false: off); unset: auto (server::ModelOptions::cuda_graphs).
  std::optional<bool> cuda_graphs;
  // parameters ENABLE_JIT_EXECUTOR / ENABLE_JIT_PROFILING (kJitExecutorParameter);
  // unset: auto (server::ModelOptions::jit_profiling).
  std::optional<bool> jit_profiling;
  // dynamic_batching.preferred_batch_size: accepted, unused (Symphony sizes batches by deadlines).
  std::vector<std::int32_t> preferred_batch_sizes;
  // Every key of `parameters` with its string_value, Symphony's included.
  std::map<std::string, std::string> parameters;
  // Fields the config sets that Symphony accepts but does not honour, as paths
  // ("dynamic_batching.preferred_batch_size", "input.format", "parameters[\"KEY\"]"),
  // each once, sorted: for a log line or a warning.
  std::vector<std::string> unused_fields;
  // The effective config (`name` filled in) as a serialized inference.ModelConfig,
  // for the protocol's model configuration endpoint (parse it with
  // model_config.pb.h, which symphony::repository exports).
  std::string config_proto;
};

// What one request of a model carries as Symphony serves it, the same for
// `serve` and the cluster: each input's spec without the batch dimension.
struct RequestTensors {
  // max_batch_size; 1 for a model without a batch dimension (max_batch_size
  // 0: each request then runs alone, one sample of exactly the dims).
  std::uint32_t max_batch = 0;
  bool batch_dimension = true;     // false: max_batch_size 0
  std::vector<TensorSpec> inputs;  // one request's sample of each input, in the config's order
  std::vector<std::string> input_names;
  // One request's outputs; empty when one has a dimension of -1: not known
  // before it runs.
  std::vector<TensorSpec> outputs;
  std::vector<std::string> output_names;  // always the config's
  // The reshapes, by position (nullopt: none; both empty when no tensor has
  // one): the shape an input's sample reaches the model in, and the shape
  // an output's sample is answered in (its dims; the model gives `reshape`).
  std::vector<std::optional<std::vector<std::int64_t>>> input_reshapes, output_reshapes;
  // When an input has a dimension of -1: each input's sample as the model is
  // warmed up and profiled with (a wildcard takes model_warmup's size, else
  // 1); empty otherwise (`inputs` are fixed).
  std::vector<TensorSpec> profile_inputs;
};

// The request tensors of a model. Errors (kInvalidArgument) name the config
// file and what Symphony cannot serve yet: no input, a reshape with -1, of an
// input with a dimension of -1, or of another element count than the dims.
Result<RequestTensors> request_tensors(const RepositoryModel& m);

// Reads one model folder: DIR/config.pbtxt (a syntax error or an unknown field
// is an error naming file:line:column), the numeric version folders and the
// model file of each version the policy chooses. Errors: kNotFound when DIR or
// its config.pbtxt does not exist, else kInvalidArgument with a message naming
// the file and the field (a refused feature, a value out of range, a name
// other than the folder's, no version to serve).
Result<RepositoryModel> read_model_dir(const std::string& dir);

// Reads DIR as read_model_dir does, with `config_json` (a ModelConfig in
// protobuf's JSON mapping, Triton's field names: the `config` parameter of the
// protocol's load request) in place of DIR/config.pbtxt, which is not read.
// An unknown field or a malformed document is a kInvalidArgument error.
Result<RepositoryModel> read_model_dir_with_config(const std::string& dir, std::string_view config_json);

// One folder of a repository and whether it can be served.
struct RepositoryEntry {
  std::string name;  // the folder's name
  std::string dir;
  std::optional<RepositoryModel> model;  // set when read_model_dir succeeded
  Status status;                         // read_model_dir's error otherwise
  bool ok() const noexcept { return model.has_value(); }
};

// Reads every model folder of DIR (its subfolders, by name, hidden ones
// skipped). A model that cannot be served is an entry with its error, not an
// error of the scan; the scan fails only when DIR cannot be listed.
Result<std::vector<RepositoryEntry>> scan_repository(const std::string& dir);

}  // namespace symphony::repository
