// ModelRepositoryManager: `symphony serve --model-repository DIR`. It reads
// the repository (symphony/repository/model_repository.hpp), turns each
// model into what the server loads (serving_options), loads and unloads
// models on the ServeApp as the model control mode says (none, poll,
// explicit: Triton's), and keeps each model's state and reason for the
// protocol's repository index (docs/repository.md#serving-a-repository).
//
// Guarantees:
//  - loads and unloads run one at a time on the manager's own thread, never
//    on a caller's (the front's I/O threads return at once); each load or
//    unload calls its `done` exactly once, when the model serves, has
//    failed, or has been unloaded (its queued requests ended);
//  - every version the version policy chose that has a model file is
//    served, each as a server model of its own (ServeApp::load_version);
//  - a reload (poll, or load of a model served) loads the changed versions
//    while the old set serves, switches the front to the new set at once,
//    then removes what is no longer served (its queued requests end): no
//    request finds the model missing. A version whose file and config did
//    not change is kept. All or nothing: if a version fails to load, the
//    old set serves on and the index gives the failure as its reason;
//  - a model that cannot be read or loaded is UNAVAILABLE with the reader's
//    or the loader's error as its reason; the others serve on;
//  - thread-safe: load, unload and index may be called from any thread.
//
//   ModelRepositoryManager m(app, {.dir = "models", .mode = ModelControlMode::kExplicit});
//   m.load_at_start();  app.start();  m.start();
//   m.load("resnet18", "", [](Status s) { ... });
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "symphony/front/service.hpp"
#include "symphony/repository/model_repository.hpp"
#include "symphony/serve/server_service.hpp"
#include "symphony/server/server.hpp"
#include "symphony/status.hpp"

namespace symphony::serve {

class ServeApp;

// Triton's --model-control-mode.
enum class ModelControlMode : std::uint8_t {
  kNone,      // every model loaded at start; load and unload refused
  kPoll,      // every model loaded at start; the repository rescanned every poll interval
  kExplicit,  // only --load-model at start; load and unload through the protocol
};
std::optional<ModelControlMode> parse_model_control_mode(std::string_view text);
std::string_view control_mode_name(ModelControlMode m) noexcept;

struct RepositoryOptions {
  std::string dir;
  ModelControlMode mode = ModelControlMode::kNone;
  // Explicit mode: the models loaded at start; "*" alone: every model.
  std::vector<std::string> load_models;
  Duration poll_interval = Duration::seconds(15);  // poll mode (Triton's default)
  // The SLO of a model whose config has no symphony.slo_ms.
  Duration default_slo = repository::kDefaultSlo;
  // How the server's devices are set where these options are given, for an
  // instance_group the server cannot honour (RepositoryOptionNames::devices).
  std::string devices_option = "--devices";
  std::function<void(const std::string&)> log;  // progress and warnings; nullptr: quiet
};

// How the options are spelt where they are given, for errors.
struct RepositoryOptionNames {
  std::string_view control_mode, load_models, poll_secs, default_slo_ms;
  std::string_view devices;  // the server's, which instance_group chooses from
};
// `symphony serve`'s flags (Triton's, and --default-slo-ms).
inline constexpr RepositoryOptionNames kRepositoryFlags{"--model-control-mode", "--load-model",
                                                        "--repository-poll-secs", "--default-slo-ms",
                                                        "--devices or the serve config's `devices`"};
// The Python Server's keywords.
inline constexpr RepositoryOptionNames kRepositoryKeywords{
    "model_control_mode", "load_models", "repository_poll_secs", "default_slo_ms", "devices"};

// The repository's options, checked: kInvalidArgument naming the option as
// `names` spell it.
Result<RepositoryOptions> repository_options(std::string dir, std::string_view control_mode,
                                             std::vector<std::string> load_models, double poll_secs,
                                             double default_slo_ms,
                                             const RepositoryOptionNames& names = kRepositoryFlags);

// Where KServe mounts a model's storage (docs/deploy.md): `symphony serve`
// takes it as its model repository when given neither a config nor one.
inline constexpr const char* kKServeModelDir = "/mnt/models";

// `symphony serve`'s repository, from its flags: repository_options() when
// `dir` names one, or, with no config, kKServeModelDir when that folder
// exists (*note then says so); nullopt with no repository. kInvalidArgument
// when there is nothing to serve, or repository flags without a repository.
Result<std::optional<RepositoryOptions>> serve_repository(bool has_config, std::string dir,
                                                          std::string_view control_mode,
                                                          std::vector<std::string> load_models,
                                                          double poll_secs, double default_slo_ms,
                                                          std::string* note);

// What the server and the protocol front are given for a repository model.
struct RepositoryServing {
  server::ModelOptions model;     // the version's file, specs, SLO, max batch, deferral cap
  ProtocolModelOptions protocol;  // the config's tensor names, the default budget; the version
};

// The server's devices that serve a repository model: its instance_group by
// Triton's rules, each group resolved against `devices` (the server's) and
// the groups' devices joined, in the server's order. None: every device
// (empty). KIND_GPU: the GPU devices (cuda, cuda-emulated, emulated) whose
// number (DeviceSpec::index) is in `gpus`, every one when `gpus` is empty.
// KIND_CPU: the CPU devices. KIND_AUTO: as KIND_GPU when the server has GPU
// devices, else the CPU devices. A group naming a GPU the server lacks, or
// of a kind it has no device of, is an error (kInvalidArgument) naming the
// config file, the field (instance_group[1].gpus), the server's devices and
// `devices_option`, which sets them. `count` is not used (one batch runs at
// a time on a device).
Result<std::vector<server::DeviceSpec>> instance_devices(const repository::RepositoryModel& m,
                                                         const std::vector<server::DeviceSpec>& devices,
                                                         std::string_view devices_option = "--devices");

// Translates one version of a model read from a repository (model.name is
// the model's: the caller gives each version a server name of its own) for
// a server with `devices` (its instance_group: instance_devices; the
// protocol's config shows the groups as resolved). Errors (kInvalidArgument)
// name the config file and what Symphony cannot serve (repository::
// request_tensors, instance_devices).
Result<RepositoryServing> serving_options(const repository::RepositoryModel& m,
                                          const repository::ModelVersion& version, Duration default_slo,
                                          const std::vector<server::DeviceSpec>& devices,
                                          std::string_view devices_option = "--devices");
// The same for the newest chosen version.
Result<RepositoryServing> serving_options(const repository::RepositoryModel& m, Duration default_slo,
                                          const std::vector<server::DeviceSpec>& devices,
                                          std::string_view devices_option = "--devices");

class ModelRepositoryManager {
 public:
  using Done = std::function<void(Status)>;
  using IndexEntry = front::InferenceService::IndexEntry;

  // REQUIRES: `app` outlives the manager.
  ModelRepositoryManager(ServeApp& app, RepositoryOptions options);
  ~ModelRepositoryManager();
  ModelRepositoryManager(const ModelRepositoryManager&) = delete;
  ModelRepositoryManager& operator=(const ModelRepositoryManager&) = delete;

  const RepositoryOptions& options() const { return opts_; }

  // Loads what the mode loads at start, on the calling thread. A model that
  // fails stays UNAVAILABLE with its reason (and is logged); the error is
  // only for a repository that cannot be listed or a --load-model name with
  // no folder.
  Status load_at_start();
  // Starts the manager's thread (and, in poll mode, the polling).
  void start();
  // Ends the thread: the running load or unload finishes, the queued ones
  // are answered kFailedPrecondition. Idempotent.
  void stop();

  // Loads (or reloads) `name`; `config_json` non-empty: a ModelConfig in
  // JSON instead of config.pbtxt. Explicit mode only (else
  // kFailedPrecondition at once). A model already served from the same
  // files and config is left as it is.
  void load(std::string name, std::string config_json, Done done);
  // Unloads `name`. Explicit mode only.
  void unload(std::string name, Done done);
  // Each model (each chosen version) with its state; the repository's
  // folders not loaded yet as UNAVAILABLE. Sorted by name, then version.
  std::vector<IndexEntry> index(bool ready_only) const;

 private:
  enum class State : std::uint8_t { kReady, kUnavailable, kLoading, kUnloading };
  // One version of a model, as the index lists it.
  struct Version {
    State state = State::kUnavailable;
    std::string reason;
    std::string fingerprint;        // of the file and config it was loaded from
    ProtocolModelOptions protocol;  // protocol.server_name: its server model; empty: none
    bool served() const { return !protocol.server_name.empty(); }
  };
  struct Entry {
    State state = State::kUnavailable;  // while no version is listed (the folder cannot be read)
    std::string reason;
    std::map<std::int64_t, Version> versions;
    std::string fingerprint;  // of what serves (every version's file, and the config)
    std::string last_error;   // poll mode: the fingerprint of the last failed try
    bool loaded() const {
      for (const auto& [_, v] : versions)
        if (v.served()) return true;
      return false;
    }
  };

  Status check_control(std::string_view what) const;
  // A job runs on the manager's thread with false, or is dropped at stop()
  // with true (it answers its caller).
  void post(std::function<void(bool stopped)> job);
  void run();
  // On the manager's thread (or at start): one model.
  Status do_load(const std::string& name, const std::string& config_json, bool force);
  Status do_unload(const std::string& name);
  void poll();
  // Loads one version on the server under a server name not in `used` (and
  // adds it there); out->protocol names it. An error names the version.
  Status load_version(const repository::RepositoryModel& m, const repository::ModelVersion& v,
                      std::set<std::string>* used, Version* out);
  void log(const std::string& m) const;

  ServeApp& app_;
  RepositoryOptions opts_;
  mutable std::mutex mu_;  // entries_, jobs_, stopping_
  std::map<std::string, Entry> entries_;
  std::deque<std::function<void(bool)>> jobs_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace symphony::serve
