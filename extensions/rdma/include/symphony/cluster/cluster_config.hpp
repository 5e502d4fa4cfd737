// cluster.yaml: one file for the scheduler, the backends, the frontends and
// the load generators of a cluster: a simulator config (docs/simulator.md,
// read by symphony::config) plus one `cluster:` section. Every key, its
// default and meaning: docs/cluster.md#clusteryaml; `subclusters:`:
// docs/cluster.md#sub-clusters-epochs-and-autoscaling-advice.
//
// Contract:
//  - parsing is the simulator's (config/'s YamlReader): unknown keys, wrong
//    types and out-of-range values are Status(kInvalidArgument) naming the
//    file, line:column and key path;
//  - the `cluster:` section is cut from the text (its lines blanked, so the
//    simulator's messages keep their line numbers) before the rest is parsed;
//  - `cluster.models` declares each model's tensors as the backends take and
//    give them (backend_torch.hpp), without the batch dimension; a model
//    without an entry is opaque to the frontend;
//  - with a model repository (the roles' --model-repository,
//    cluster_repository.hpp) the models and their tensors come from it: the
//    file must then have neither `models:` nor `cluster.models`.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "symphony/config/config.hpp"
#include "symphony/status.hpp"
#include "symphony/tensor_spec.hpp"
#include "symphony/time.hpp"

namespace symphony::cluster {

inline constexpr std::uint32_t kMaxClusterSubClusters = 256;
inline constexpr Duration kMinClusterEpoch = Duration::milliseconds(200);
// A scheduler's index in cluster.schedulers is the low byte of its terms.
inline constexpr std::size_t kMaxClusterSchedulers = 255;

// cluster.models: each model's tensors, as tensor specs ("float32[3,64,64]",
// symphony/tensor_spec.hpp: the shape without the batch dimension). A model
// repository's may have dims of -1 (any size; such a tensor travels with
// its shape, shaped_bytes.hpp) and no batch dimension.
struct ModelTensors {
  std::vector<TensorSpec> inputs;   // empty: not declared
  std::vector<TensorSpec> outputs;  // empty: not declared
  // false: a repository's max_batch_size 0: the specs are whole shapes and
  // each request is one sample of exactly them.
  bool batch_dimension = true;
  // The protocol's names of the tensors (a repository's config.pbtxt); empty:
  // "input" / "input0", "input1", ... (front::tensor_name).
  std::vector<std::string> input_names;
  std::vector<std::string> output_names;
};

// A model repository's instance_group as the cluster honours it: which
// devices of each backend serve the model (docs/cluster.md#running-from-a-model-repository).
struct DeviceGroup {
  enum class Kind : std::uint8_t { kAuto, kGpu, kCpu } kind = Kind::kAuto;
  std::vector<std::int32_t> gpus;  // GPU numbers (cuda:1 is 1); empty: every GPU
};

// Whether a device is GPU-like: cuda, cuda-emulated, emulated (not cpu).
// `device` is a backend's device name, with or without its host prefix
// ("host/cuda:1", "cpu:0").
bool is_gpu_device(std::string_view device);
// Whether any of a backend's devices is GPU-like (KIND_AUTO's question).
bool has_gpu_device(const std::vector<std::string>& devices);

// Whether `groups` (empty: every device) choose `device` on a backend that
// has a GPU device or not, by `serve`'s rules: KIND_GPU the GPUs numbered in
// `gpus` (all when empty), KIND_CPU the CPUs, KIND_AUTO as KIND_GPU when
// `gpus` are listed or the backend has a GPU, else the CPUs; the union.
bool groups_select(const std::vector<DeviceGroup>& groups, std::string_view device, bool backend_has_gpu);

struct ClusterSettings {
  std::string token;
  Duration heartbeat_interval = Duration::milliseconds(100);
  Duration heartbeat_timeout = Duration::milliseconds(750);
  bool learn_delays = true;
  // Online recalibration of every model's profile from the execution times
  // the backends report (BatchDone::exec_ns); `recalibrate: false` plans with
  // the config's profiles throughout.
  bool recalibrate = true;
  // The scheduler sends its frontends its models' admission tests, so that
  // they refuse at once what it would refuse (docs/cluster.md#admission-at-the-frontends).
  bool frontend_admission = true;
  // The scheduler's RuntimeConfig::backlog_share (serve's
  // admission_backlog_share; docs/serving.md#how-long-admitted-requests-may-wait);
  // 0: the gathering's own (default_backlog_share; 1 for target_batch, the
  // cluster's).
  double admission_backlog_share = 0;
  // Every model's ModelConfig::defer_without_history in the scheduler (serve's
  // key; docs/serving.md#the-first-request): false sends a model's batches at
  // their earliest until a gap between two of its requests was seen.
  bool defer_without_history = false;
  double delay_percentile = 0.99;
  std::uint32_t delay_window = 2000;
  Duration delay_update = Duration::milliseconds(500);
  Duration delay_max_age = Duration::seconds(5);
  std::uint32_t shards = 1;
  std::uint32_t max_gpus = 1024;
  std::uint32_t max_requests = 1u << 18;
  std::uint32_t max_input_bytes = 16u << 20;
  // A frontend frees a region of its input pool whose model left once it has
  // been idle this long (ClientOptions::pool_region_idle).
  Duration pool_region_idle = Duration::seconds(30);
  std::string ucx_tls = "tcp";
  std::string metrics;  // HOST:PORT of the scheduler's metrics endpoint; empty: none
  Duration progress_spin =
      Duration::zero();  // the scheduler's network thread polls this long before sleeping
  // Experiments only: TransportOptions::inject_delay of every role that reads
  // this file (an emulated slower network; docs/cluster.md).
  Duration inject_delay = Duration::zero();
  std::map<std::string, ModelTensors> models;  // cluster.models, by model name
  // cluster.schedulers: HOST:PORT of every scheduler, the first the primary
  // at start (empty: one scheduler, given to each process by --scheduler).
  std::vector<std::string> schedulers;
};

struct ClusterConfig {
  config::Config sim;       // the simulator-format sections: models, policy, delays (floors), workload
  ClusterSettings cluster;  // the `cluster:` section
  bool has_cluster_section = false;
  std::string model_repository;  // the repository the models came from; empty: the file's `models:`
  // The repository's version each model serves (the protocol's metadata); none: "1".
  std::map<std::string, std::string> model_versions;
  // The protocol's model of a repository's version below the highest
  // ("linear/1" -> "linear", cluster_model_name); none: the model's own name.
  std::map<std::string, std::string> protocol_models;
  // The repository's versions that no role serves (its version_policy did
  // not choose them): model, version, why; the frontend's repository index.
  struct UnservedVersion {
    std::string model;
    std::string version;
    std::string reason;
  };
  std::vector<UnservedVersion> unserved_versions;
  // A repository model's instance_group, by model (none: every device).
  std::map<std::string, std::vector<DeviceGroup>> instance_groups;
  // A model's default_priority_level (a `models:` entry's, or a repository
  // model's dynamic_batching), by model; none: the lowest level. Its levels
  // are its ModelConfig::priority_levels.
  std::map<std::string, std::uint32_t> default_priority_levels;
};

struct ClusterRepository;  // cluster_repository.hpp

// Reads cluster.yaml; kInvalidArgument when it cannot be used. When
// `need_token` is set a missing token is an error (the scheduler and
// backends need one). With `repository`, its models and tensors replace
// `models:` and `cluster.models`, which the file must then not have.
Result<ClusterConfig> load_cluster_config(const std::string& path, bool need_token = true,
                                          const ClusterRepository* repository = nullptr);
Result<ClusterConfig> parse_cluster_config(const std::string& yaml_text, const std::string& origin,
                                           const std::string& base_dir, bool need_token = true,
                                           const ClusterRepository* repository = nullptr);

// Reads cluster.yaml's `cluster:` section alone (the rest is not checked):
// what a peer that runs no model of its own needs (an emulated backend).
Result<ClusterSettings> load_cluster_settings(const std::string& path, bool need_token = true);

// The token to use: SYMPHONY_CLUSTER_TOKEN when set, else the config's.
std::string effective_token(const ClusterSettings& s);

}  // namespace symphony::cluster
