// The `symphony serve` configuration file (YAML), read by config/'s strict
// YamlReader like the simulator's and the cluster's configs: unknown keys,
// wrong types and bad values are errors that name the file, line:column and
// key path ("serve.yaml:9:7: models[0].slo_ms: must be > 0, got 0"). No
// libtorch here: `symphony load --config` reads it in every build.
//
//   devices: auto            # auto | cpu[:N] | cuda[:i],... | emulated:N
//   cpu_threads: 1           # libtorch intra-op threads per CPU device
//   policy: deferred         # the policy language of symphony/policy.hpp (docs/policies.md)
//   gather: target_batch     # target_batch | sliding_window
//   shards: 1                # model-shard threads of the runtime
//   metrics: 127.0.0.1:9464  # Prometheus /metrics, /healthz, /readyz (off when absent; port 0: any)
//   delays: {ctrl_ms: 0, data_ms: 0, resp_ms: 0, safety_margin_ms: 1}
//                            # (ctrl_us, data_us, resp_us, margin_us: deprecated, in µs)
//   profiling: {latency: p90, max_batch: 32, repeats: 20}   # latency: median | p90 | p99
//   recalibrate: true        # follow measured batch times online (or a map: {percentile: 0.9, window: 64, ...})
//   load:                    # absent: serve protocol requests until SIGINT/SIGTERM
//     duration_s: 20         # how long the load generator sends
//     warmup_s: 2            # sent but not counted in the report
//     arrival: poisson       # poisson | uniform | gamma:<shape>
//     seed: 1
//   models:
//     - name: squeezenet
//       path: models/squeezenet1_1.pt   # relative to this file
//       input: float32[3,64,64]          # or inputs: ["float32[2]", "int64[3]"] (symphony/tensor_spec.hpp)
//       slo_ms: 100
//       max_batch: 32
//       rate: 50                         # requests/s sent to this model
//       profile: auto                    # auto (measure if no file) | a profile file
//       alpha_ms: 1.0                    # emulated devices: l(b) = alpha*b + beta
//       beta_ms: 5.0
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
  std::vector<std::string> inputs;  // tensor specs, e.g. "float32[3,64,64]" (checked)
  Duration slo;
  std::uint32_t max_batch = 32;
  std::optional<Duration> max_defer;    // ModelConfig::max_defer; unset: no cap
  double rate = 0;                      // requests/s from the load generator
  std::string profile = "auto";         // "auto" or a profile file
  std::optional<Duration> alpha, beta;  // emulated devices
};

struct ServeConfig {
  std::string file;  // where it was read from (for messages)
  std::string devices = "auto";
  int cpu_threads = 1;
  PolicySpec policy;  // `policy:` and `gather:`
  std::uint32_t shards = 1;
  std::string metrics;  // HOST:PORT of the metrics endpoint; empty: none
  Delays delays{Duration::zero(), Duration::zero(), Duration::zero(), Duration::milliseconds(1)};
  profile_io::ProfileColumn profile_latency = profile_io::ProfileColumn::kP90;
  std::uint32_t profile_max_batch = 32;
  int profile_repeats = 20;
  RecalibrationOptions recalibration = RecalibrationOptions::on();  // `recalibrate:`
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
Result<ServeConfig> load_serve_config(const std::string& path);
// Same, from YAML text; `origin` names it in messages and `base_dir`
// resolves relative paths.
Result<ServeConfig> parse_serve_config(const std::string& yaml, const std::string& origin,
                                       const std::string& base_dir);

}  // namespace symphony::config
