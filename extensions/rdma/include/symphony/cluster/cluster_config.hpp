// cluster.yaml: one file for the scheduler, the backends and the load
// generators of a cluster.
//
// It is a config of the simulator's format (docs/simulator.md, read by
// symphony::config as the simulator reads it: the models with their
// profiles, SLOs and batch limits, the policy and gathering, `delays` as
// floors of what the scheduler learns, and the workload a load generator
// offers; `gpus` is the cluster's expected size, used when the simulator is
// asked about the same config) plus one `cluster:` section:
//
//   cluster:
//     token: "a shared secret"        # or token_file: path (relative to this file);
//                                     # SYMPHONY_CLUSTER_TOKEN overrides both
//     heartbeat_ms: 100               # the scheduler pings every peer this often
//     heartbeat_timeout_ms: 750       # a peer silent this long is lost
//     learn_delays: true              # d_ctrl/d_data/d_resp from measurements
//     recalibrate: true               # each model's l(b) follows the batch times
//                                     # the backends measure (profile_calibrator.hpp)
//     delay_percentile: 0.99          # ... as this percentile
//     delay_window: 2000              # ... of the last this many samples
//     delay_update_ms: 500            # how often the runtime gets new delays
//     delay_max_age_ms: 5000          # samples older than this are forgotten
//     shards: 1                       # the scheduler's model-shard threads
//     max_gpus: 1024                  # GPUs the scheduler can hold at once
//     max_requests: 262144            # requests queued or running at once
//     max_input_bytes: 16777216       # largest input a frontend may submit
//     ucx_tls: tcp                    # UCX_TLS when the environment sets none
//     progress_spin_us: 0             # the scheduler's network thread polls this
//                                     # long before it sleeps on the event fd
//     inject_delay_us: 0              # experiments only: every process holds each
//                                     # message it receives and each read it makes this
//                                     # long (an emulated slower network;
//                                     # SYMPHONY_INJECT_DELAY_US overrides it per process)
//     metrics: 127.0.0.1:9464         # the scheduler's /metrics, /healthz, /readyz
//                                     # (off when absent; port 0: any free port)
//     schedulers:                     # hot-spare schedulers (docs/cluster.md#hot-spare-schedulers):
//       - 10.0.0.1:7000               # every scheduler's --listen address, the first
//       - 10.0.0.2:7000               # one primary at start; backends and frontends
//                                     # take the list from here (--scheduler: one)
//     models:                         # what `symphony frontend` tells protocol clients
//       linear: {input: "float32[4]", output: "float32[3]"}
//       two: {inputs: ["float32[2]", "int64[3]"]}   # outputs unknown: learned from answers
//
// `cluster.models` declares a model's tensors as the backends take and give
// them (backend_torch.hpp: a request's input is its tensors' bytes in order,
// its output the output tensors' bytes): `input`/`inputs` and
// `output`/`outputs`, each "dtype[d1,d2,...]" without the batch dimension
// (dtype names as serve's: float32/float, float64/double, float16/half,
// bfloat16, int64/long, int32/int, int16, int8, uint8, bool). A model without
// an entry is opaque to the frontend (emulated backends take any bytes).
//
// The simulator's `subclusters:` section (docs/simulator.md, docs/cluster.md)
// splits the scheduler into sub-clusters: count (L; absent: one scheduler
// over every GPU), gpus (each sub-cluster's share of the GPUs that register;
// default equal shares of `gpus`), epoch_s (re-partitioning period; 0 or
// absent: the initial placement only; at least kMinClusterEpoch here),
// max_disruption (C_max), method (greedy, milp, random) with time_limit_s,
// memory_cap_mib / rate_cap_rps and model_memory. The scheduler accepts at
// most kMaxClusterSubClusters sub-clusters.
//
// Parsing is as strict as the simulator's: unknown keys, wrong types and
// out-of-range values throw config::ConfigError naming the file, line, column
// and key. The `cluster:` section is cut from the text (its lines blanked,
// so the simulator's messages keep their line numbers) before the rest is
// parsed as a simulator config.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "symphony/config/config.hpp"
#include "symphony/status.hpp"
#include "symphony/time.hpp"

namespace symphony::cluster {

inline constexpr std::uint32_t kMaxClusterSubClusters = 256;
inline constexpr Duration kMinClusterEpoch = Duration::milliseconds(200);
// A scheduler's index in cluster.schedulers is the low byte of its terms.
inline constexpr std::size_t kMaxClusterSchedulers = 255;

// One tensor of cluster.models: dtype as written canonically ("float32",
// "int64", ...; the aliases resolved) and the shape without the batch
// dimension.
struct TensorDecl {
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::size_t bytes() const;  // elements x the dtype's size
};
struct ModelTensors {
  std::vector<TensorDecl> inputs;   // empty: not declared
  std::vector<TensorDecl> outputs;  // empty: not declared
};

// Parses "float32[3,64,64]"; errors name the text and what is wrong.
Result<TensorDecl> parse_tensor_decl(std::string_view text);
// Bytes of one element of a canonical dtype (0 for an unknown name).
std::size_t dtype_bytes(std::string_view dtype);

struct ClusterSettings {
  std::string token;
  Duration heartbeat_interval = Duration::milliseconds(100);
  Duration heartbeat_timeout = Duration::milliseconds(750);
  bool learn_delays = true;
  // Online recalibration of every model's profile from the execution times
  // the backends report (BatchDone::exec_ns); `recalibrate: false` plans with
  // the config's profiles throughout.
  bool recalibrate = true;
  double delay_percentile = 0.99;
  std::uint32_t delay_window = 2000;
  Duration delay_update = Duration::milliseconds(500);
  Duration delay_max_age = Duration::seconds(5);
  std::uint32_t shards = 1;
  std::uint32_t max_gpus = 1024;
  std::uint32_t max_requests = 1u << 18;
  std::uint32_t max_input_bytes = 16u << 20;
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
};

// Reads cluster.yaml; throws config::ConfigError. When `need_token` is set a
// missing token is an error (the scheduler and backends need one).
ClusterConfig load_cluster_config(const std::string& path, bool need_token = true);
ClusterConfig parse_cluster_config(const std::string& yaml_text, const std::string& origin,
                                   const std::string& base_dir, bool need_token = true);

// The token to use: SYMPHONY_CLUSTER_TOKEN when set, else the config's.
std::string effective_token(const ClusterSettings& s);

}  // namespace symphony::cluster
