// Backend devices that run TorchScript models: the server library's
// CpuExecutor (one worker per CPU device) and CudaStreamExecutor (one stream
// per GPU, where CUDA is built), fed through the server's BatchRunner
// interface. Built only with the server library (libtorch): target
// symphony_cluster_torch.
//
// A request's input is the raw bytes of its tensors, in the order of the
// model's input specs, each C-contiguous with the spec's dtype and shape
// (without a batch dimension): for float32[3,64,64], 3*64*64*4 bytes; an
// input whose spec has a -1 is preceded by its shape (shaped_bytes.hpp). Its
// output is the raw bytes of the output tensor (of each tensor of a tuple,
// one after the other), as the model returns them for that request, each
// preceded by its shape when the model's outputs are shaped.
//
//   auto d = make_torch_devices("cpu:2", {{"resnet18", "resnet18.pt", {"float32[3,64,64]"}}}, 1, "host1");
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "symphony/cluster/backend_devices.hpp"
#include "symphony/cluster/cluster_config.hpp"
#include "symphony/status.hpp"

namespace symphony::cluster {

struct TorchModelSpec {
  std::string name;                 // the cluster's model name
  std::string path;                 // TorchScript file
  std::vector<std::string> inputs;  // "float32[4]", one per input tensor
  // A model repository's `reshape`s (server::TorchModel::Options): the shape
  // an input's sample reaches the model in, and the shape an output's sample
  // is answered in (nullopt or absent: as it is).
  std::vector<std::optional<std::vector<std::int64_t>>> input_reshapes, output_reshapes;
  // The samples warm-up runs when an input has a -1 (empty: each -1 as 1).
  std::vector<std::string> profile_inputs;
  // false: a repository's max_batch_size 0 (`inputs` are whole shapes).
  bool batch_dimension = true;
  // Every output answered with its shape first (an output's dims have a -1).
  bool shaped_outputs = false;
  // A repository's instance_group: the devices it is loaded on (none: every one).
  std::vector<DeviceGroup> instance_groups;
  // The largest batch the scheduler may send it (the config's, capped by its
  // profile's): the backend warms it up at every size up to this before it
  // registers (docs/cluster.md#warm-start). 0: batch 1 only.
  std::uint32_t max_batch = 0;
  // server::TorchModel::Options::cuda_graphs and ::jit_profiling (a
  // repository's optimization.cuda.graphs, ENABLE_JIT_EXECUTOR and
  // ENABLE_JIT_PROFILING); unset: auto, as serve.
  std::optional<bool> cuda_graphs, jit_profiling;
};

// Parses "name:path:spec[+spec...]" (the backend's --model).
Result<TorchModelSpec> parse_torch_model_spec(const std::string& text);

struct ClusterRepository;  // cluster_repository.hpp

// A backend's models: each --model text, then (when given) every model of a
// repository, its version's file and its inputs. A malformed --model or a
// name given twice is a kInvalidArgument error naming it.
Result<std::vector<TorchModelSpec>> torch_model_specs(const std::vector<std::string>& model_flags,
                                                      const ClusterRepository* repository);

// "cpu", "cpu:N" (N CPU workers) or "cuda", "cuda:0,1" (CUDA builds);
// `cpu_threads` intra-op threads per CPU worker. Loads every model and warms
// it up on each of its devices (TorchModelSpec::max_batch) before it
// returns; `notes`, when given, gets one line per model saying so.
Result<std::unique_ptr<BackendDevices>> make_torch_devices(const std::string& devices,
                                                           const std::vector<TorchModelSpec>& models,
                                                           int cpu_threads, const std::string& prefix,
                                                           std::vector<std::string>* notes = nullptr);

}  // namespace symphony::cluster
