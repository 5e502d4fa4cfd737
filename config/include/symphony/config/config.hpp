// Configs: the YAML format of docs/simulator.md (models and their profiles,
// policy, delays, workload, sub-clusters, ...), parsed and checked into the
// core's ExperimentSpec plus what a report needs. The simulator
// (symphony::simtool) and the cluster's processes (cluster.yaml is such a
// config plus a `cluster:` section, extensions/rdma) read configs through
// this library only, so the two parse every section the same way.
//
// Parsing is strict: an unknown key, a value of the wrong type or out of
// range, a missing or unreadable profile table, trace or profile file, each
// is a Status (kInvalidArgument) whose message names the file, the line and
// the key ("stagger.yaml:7:3: workload.rate: must be >= 0, got -5"). Paths in a
// config are relative to the config file's directory; profile tables named by
// `zoo:` are looked up in the config's `profile_dirs`, then in
// $SYMPHONY_PROFILE_PATH (colon-separated), then in the data directory the
// project was built from (and installed to).
//
// Not part of the core: uses yaml-cpp, symphony::partition (the
// `subclusters:` section's settings) and the file system; yaml-cpp's
// exceptions never leave the library.
//
//   SYMPHONY_ASSIGN_OR_RETURN(config::Config c, config::load_config("examples/paper/stagger_resnet50.yaml"));
//   Result<config::Config> d = config::parse_config(yaml_text, "<memory>");
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "symphony/experiment_spec.hpp"
#include "symphony/partition/subclusters.hpp"
#include "symphony/policy.hpp"
#include "symphony/status.hpp"

namespace symphony::config {

// Where a model came from, for the report.
struct ModelInfo {
  std::string source;                          // "inline", "zoo:a100", "file:<path>"
  std::optional<Duration> own_timeout;         // timeout_ms of the model
  std::optional<double> own_timeout_fraction;  // timeout_slo_fraction of the model
  // default_priority_level (ModelConfig::priority_levels; 0: the lowest level).
  std::uint32_t default_priority_level = 0;
};

struct GoodputSearchSpec {
  double start_rps = 0;  // 0: start from the analytical (fluid) capacity
  double tolerance = 0.005;
  std::uint32_t max_steps = 40;
};

struct MinGpusSpec {
  double rate = 0;  // offered rate to serve; 0: not set
  std::uint32_t max_gpus = 1024;
};

struct Config {
  std::string origin;                 // the file (or "<memory>") it came from
  std::string name;                   // the config's name (default: file stem)
  ExperimentSpec spec;                // with the policy (spec.policy) applied: per-model timeouts filled in
  std::vector<ModelInfo> model_info;  // parallel to spec.models
  std::string workload_desc;          // "poisson", "gamma(0.3)", "trace:<file>"
  GoodputSearchSpec goodput;
  MinGpusSpec min_gpus;
  // The `subclusters:` section; absent: one scheduler over every GPU, as ever.
  std::optional<partition::SubClusterConfig> subclusters;

  // Replaces the exec policy (the CLI's --policy; the gathering policy stays),
  // recomputing per-model timeouts.
  void set_policy(const PolicySpec& p);
};

// Command-line style overrides of a loaded config (the CLI's --policy,
// --gather, --seed, --gpus and --rate); shared with the bindings so that both
// produce the same report for the same request.
struct Overrides {
  std::optional<std::string> policy;  // as parse_policy() (policy.hpp) reads it
  std::optional<std::string> gather;  // as parse_gather() reads it
  std::optional<std::uint64_t> seed;
  std::optional<std::uint32_t> gpus;
  std::optional<double> rate;  // total offered rate; scales every model's rate
};

// Applies `o` to `c`; kInvalidArgument (naming the option: "--gpus: ...")
// when a value is bad, `c` then partly changed.
Status apply_overrides(Config& c, const Overrides& o);

// Models the caller gives instead of the config's `models:` section (the
// cluster's --model-repository); the config must then have no such section.
// The caller checks each model (ModelState<>::validate).
struct GivenModels {
  std::vector<ModelConfig> models;
  std::vector<std::string> sources;  // ModelInfo::source of each model
  std::string from;                  // where they come from, for the error: "--model-repository models"
};

// Reads and checks a YAML config file.
Result<Config> load_config(const std::string& path, const GivenModels* given = nullptr);

// Parses YAML text; `origin` names it in messages; relative paths in it are
// resolved against `base_dir` (default: the current directory).
Result<Config> parse_config(const std::string& yaml_text, const std::string& origin = "<memory>",
                            const std::string& base_dir = "", const GivenModels* given = nullptr);

// The directories searched for `zoo:` tables, in order, for a config in
// `base_dir` with the given `profile_dirs`.
std::vector<std::string> profile_search_path(const std::vector<std::string>& profile_dirs,
                                             const std::string& base_dir);

}  // namespace symphony::config
