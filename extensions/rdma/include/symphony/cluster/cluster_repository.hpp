// The cluster's models read from a model repository in Triton's layout
// (symphony/repository/model_repository.hpp), the one translation that the
// scheduler, the backends and the frontends use at start with
// --model-repository DIR (docs/cluster.md#running-from-a-model-repository).
//
// Contract:
//  - every model folder must be servable: one that cannot be read, or whose
//    tensors Symphony cannot serve (repository::request_tensors), fails the
//    whole read with the reader's error naming the file; an empty
//    repository is an error;
//  - each model serves every version its policy chose, each a model of the
//    cluster with its own file and profile: the highest under the model's
//    name (what a request naming no version runs), the others as
//    "<model>/<version>" (cluster_model_name);
//  - tensors are served as `serve` serves them: dims of -1 (they travel
//    with their shapes, shaped_bytes.hpp), reshapes, max_batch_size 0; and
//    instance_group, applied to each backend's devices (cluster_config.hpp);
//  - with `profiles`, each version's latency profile is read from the
//    <stem>.<device>.profile.yaml beside its model file (profile_io's
//    default_profile_path), column p90 as `serve` schedules by default; a
//    missing profile is an error that names the command that makes one.
//
//   Result<ClusterRepository> r = read_cluster_repository("models", {.profiles = true});
//   ClusterConfig c = load_cluster_config("cluster.yaml", true, &*r);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "symphony/cluster/cluster_config.hpp"
#include "symphony/status.hpp"
#include "symphony/types.hpp"

namespace symphony::cluster {

struct RepositoryReadOptions {
  // Read each model's latency profile (the scheduler); frontends and
  // backends do not schedule and leave ModelConfig::profile empty.
  bool profiles = false;
  // The device whose profile to read ("cpu:0", "cuda:0"); empty: the one
  // profile file beside the model file (several: an error listing them).
  std::string profile_device;
};

struct ClusterRepositoryModel {
  // Name, SLO (symphony.slo_ms, else repository::kDefaultSlo), max batch
  // (the config's, capped by the profile's largest batch), deferral cap,
  // queue bound; the profile when read.
  ModelConfig config;
  std::string model;     // the repository's (and the protocol's) name; config.name is this version's
  ModelTensors tensors;  // one request's inputs and outputs, with the config's names
  // The config's reshapes (repository::RequestTensors): the shape the
  // backends hand each input's sample to the model in, and each output's is
  // answered in.
  std::vector<std::optional<std::vector<std::int64_t>>> input_reshapes, output_reshapes;
  // dynamic_batching.default_priority_level (its priority_levels are
  // config.priority_levels); 0: unset, the lowest level.
  std::uint32_t default_priority_level = 0;
  // instance_group: which devices of each backend serve it (none: every one).
  std::vector<DeviceGroup> instance_groups;
  // When an input has a -1: each input's sample as the backends warm the
  // model up and the profile was measured (repository::RequestTensors).
  std::vector<TensorSpec> profile_inputs;
  // optimization.cuda.graphs and the PyTorch backend's ENABLE_JIT_EXECUTOR /
  // ENABLE_JIT_PROFILING (repository::RepositoryModel): unset, auto.
  std::optional<bool> cuda_graphs, jit_profiling;
  std::int64_t version = 0;
  std::string model_path;    // the version's model file
  std::string config_path;   // its config.pbtxt
  std::string profile_path;  // the profile read; empty when not read
};

// A version of a repository model that the cluster does not serve: one its
// version_policy did not choose (the repository reader's reason).
struct UnservedVersion {
  std::string model;
  std::int64_t version = 0;
  std::string reason;
};

struct ClusterRepository {
  std::string dir;
  std::vector<ClusterRepositoryModel> models;  // by folder name, then version ascending
  std::vector<UnservedVersion> unserved;       // by folder name, then version ascending
};

// The cluster's name of a version below a model's highest: "linear/1".
std::string cluster_model_name(const std::string& model, std::int64_t version);

// Reads every model of `dir` (see the contract). Errors are kInvalidArgument
// (kNotFound when `dir` does not exist) and name the file.
Result<ClusterRepository> read_cluster_repository(const std::string& dir,
                                                  const RepositoryReadOptions& options);

// Reads one model folder, DIR/`model`, by the same rules (a load while the
// cluster serves: docs/cluster.md#model-control): every version its policy
// chooses, named as at start. Errors name the file; kNotFound when the
// repository has no folder `model`.
Result<ClusterRepository> read_cluster_repository_model(const std::string& dir, const std::string& model,
                                                        const RepositoryReadOptions& options);

}  // namespace symphony::cluster
