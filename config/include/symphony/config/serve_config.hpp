// The `symphony serve` configuration file (YAML): devices, policy, gathering, shards, metrics address,
// delays, profiling, recalibration, an optional built-in load and the models. Every key, with an
// example: (docs/serving.md#the-config-file).
//
// Guarantees: read by config/'s strict YamlReader like the simulator's and the cluster's configs:
// unknown keys, wrong types and bad values are errors that name the file, line:column and key path
// ("serve.yaml:9:7: models[0].slo_ms: must be > 0, got 0"). Delays are in ms (`ctrl_us`, `data_us`,
// `resp_us`, `margin_us` are deprecated, in µs); model paths are relative to the file. No libtorch
// here: `symphony load --config` reads it in every build.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "symphony/policy.hpp"
#include "symphony/profile_calibrator.hpp"
#include "symphony/profile_io/profile_file.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"
#include "symphony/types.hpp"
#include "symphony/workload.hpp"

namespace symphony::config {

struct ServeModelConfig {
  std::string name;
  std::string path;                 // absolute, or relative to the working directory
  std::vector<std::string> inputs;  // tensor specs, e.g. "float32[3,64,64]" (checked; -1: any size)
  // When an input has a -1: each input's sample as the model is profiled (and
  // the load generator sends it), fixed dims; empty: every -1 as 1.
  std::vector<std::string> profile_inputs;
  Duration slo;
  std::uint32_t max_batch = 32;
  std::optional<Duration> max_defer;  // ModelConfig::max_defer; unset: no cap
  std::uint32_t max_queue = 0;        // ModelConfig::max_queue; 0: no bound
  // ModelOptions::priority_levels / default_priority_level (0: unset).
  std::uint32_t priority_levels = 0;
  std::uint32_t default_priority_level = 0;
  double rate = 0;                      // requests/s from the load generator
  std::string profile = "auto";         // "auto" or a profile file
  std::optional<Duration> alpha, beta;  // emulated devices
  // `devices:` the server's devices that serve it, by name ("cpu:1", or a
  // list); read by serve (server::parse_device_names). Empty: every device.
  std::vector<std::string> devices;
  // `cuda_graphs: auto|on|off` (server::ModelOptions::cuda_graphs); unset: auto.
  std::optional<bool> cuda_graphs;
  // `jit_executor: auto|profiling|simple` (server::ModelOptions::jit_profiling:
  // true profiling, false simple); unset: auto.
  std::optional<bool> jit_profiling;
};

struct ServeConfig {
  std::string file;  // where it was read from (for messages)
  std::string devices = "auto";
  int cpu_threads = 1;
  PolicySpec policy;  // `policy:` and `gather:`
  std::uint32_t shards = 1;
  // `defer_without_history:` (ModelConfig::defer_without_history): true
  // defers a model's first requests as the paper's rule does; false (the
  // default) sends them at once (docs/serving.md#the-first-request).
  bool defer_without_history = false;
  std::string metrics;  // HOST:PORT of the metrics endpoint; empty: none
  Delays delays{Duration::zero(), Duration::zero(), Duration::zero(), Duration::milliseconds(1)};
  profile_io::ProfileColumn profile_latency = profile_io::ProfileColumn::kP90;
  std::uint32_t profile_max_batch = 32;
  int profile_repeats = 20;
  RecalibrationOptions recalibration = RecalibrationOptions::on();  // `recalibrate:`
  // `load_run_wait_ms:` (ServerOptions::load_run_wait): how long each run of
  // a model loaded while others serve waits for a gap in its device's schedule
  // before the load fails.
  double load_run_wait_ms = 5000;
  // `admission:` (ServerOptions::admission): refuse at once what the backlog
  // could not serve in time (on, the default), or queue it to expire (off).
  bool admission = true;
  // `admission_backlog_share:` (ServerOptions::admission_backlog_share): the
  // share of a request's time left its model's backlog may take, [0.05, 1];
  // absent (0): the gathering's own (1; 0.5 with `gather: sliding_window`).
  double admission_backlog_share = 0;
  // `scheduler_nice:` (ServerOptions::scheduler_nice): the nice value of the
  // scheduler's threads, -10 by default (0: the process's own).
  int scheduler_nice = -10;
  // `scheduler_realtime:` (ServerOptions::scheduler_realtime): their
  // SCHED_FIFO priority before that, 1-99 (0: none, the default).
  int scheduler_realtime = 0;
  // `overlap: auto|on|off` (ServerOptions::overlap): a batch's staging and
  // launch run while the batch before it does, dispatched ahead by their
  // learned cost. auto: on when every device is a CUDA GPU.
  std::string overlap = "auto";
  // `pinned_memory_pool_byte_size:` (--pinned-memory-pool-byte-size): the
  // host memory pool requests' inputs land in (ServeApp::start_input_pool);
  // 0, the default: sized from the models (max batch x sample bytes x 8).
  std::uint64_t pinned_memory_pool_byte_size = 0;
  // `load:`: with it, serve drives the models with its own generator for
  // duration_s; without it, serve answers protocol requests (--http, --grpc)
  // until SIGINT/SIGTERM.
  bool has_load = false;
  double duration_s = 20;
  double warmup_s = 2;
  std::string arrival = "poisson";  // poisson | uniform | gamma:<shape>, as written
  ArrivalProcess arrival_process;   // `arrival`, read (parse_arrival_process)
  double gamma_shape = 1.0;         // arrival_process.shape
  std::uint64_t seed = 1;
  std::vector<ServeModelConfig> models;
};

// Reads and validates a serve config; relative model and profile paths are
// resolved against the file's directory. kNotFound when there is no such
// file, kInvalidArgument (file:line:col: key: problem) when it is wrong.
// `models_required` false (serve with a model repository): `models:` may be
// absent, the file may be empty, and a `load:` section is an error.
Result<ServeConfig> load_serve_config(const std::string& path, bool models_required = true);
// Same, from YAML text; `origin` names it in messages and `base_dir`
// resolves relative paths.
Result<ServeConfig> parse_serve_config(const std::string& yaml, const std::string& origin,
                                       const std::string& base_dir, bool models_required = true);

}  // namespace symphony::config
