// ModelRepositoryManager: a model repository served by ServeApp
// (model_repository_manager.hpp).
#include "symphony/serve/model_repository_manager.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>

#include "symphony/serve/app.hpp"

namespace symphony::serve {
namespace {

namespace fs = std::filesystem;
using repository::RepositoryModel;

constexpr std::string_view kState[] = {"READY", "UNAVAILABLE", "LOADING", "UNLOADING"};

// What a version's load depends on: the effective config and its file's
// identity (size and modification time), so that a poll reloads a version
// whose file changed and keeps one that did not.
std::string version_fingerprint(const RepositoryModel& m, const repository::ModelVersion& v) {
  std::error_code ec;
  const auto size = fs::file_size(v.model_path, ec);
  const auto time = fs::last_write_time(v.model_path, ec);
  return m.config_proto + '\0' + v.model_path + '\0' + std::to_string(ec ? 0 : size) + '\0' +
         std::to_string(ec ? 0 : time.time_since_epoch().count());
}

// The whole model's: a poll loads it again when any version or the config
// changed, and a repeated load of an unchanged one does nothing.
std::string fingerprint(const RepositoryModel& m) {
  std::string f;
  for (const repository::ModelVersion& v : m.versions) f += version_fingerprint(m, v) + '\n';
  return f;
}

// The folders of the repository that may be models (hidden ones skipped).
std::vector<std::string> model_folders(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code e2;
    if (!name.empty() && name[0] != '.' && it->is_directory(e2)) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::optional<ModelControlMode> parse_model_control_mode(std::string_view t) {
  if (t == "none") return ModelControlMode::kNone;
  if (t == "poll") return ModelControlMode::kPoll;
  if (t == "explicit") return ModelControlMode::kExplicit;
  return std::nullopt;
}

std::string_view control_mode_name(ModelControlMode m) noexcept {
  switch (m) {
    case ModelControlMode::kNone:
      return "none";
    case ModelControlMode::kPoll:
      return "poll";
    case ModelControlMode::kExplicit:
      return "explicit";
  }
  return "?";
}

Result<std::optional<RepositoryOptions>> serve_repository(bool has_config, std::string dir,
                                                          std::string_view control_mode,
                                                          std::vector<std::string> load_models,
                                                          double poll_secs, double default_slo_ms,
                                                          std::string* note) {
  if (!has_config && dir.empty() && std::filesystem::is_directory(kKServeModelDir)) {
    dir = kKServeModelDir;
    *note = std::string("no config and no --model-repository: serving ") + kKServeModelDir +
            " (KServe's model mount)";
  }
  if (dir.empty()) {
    if (!has_config)
      return Status(Errc::kInvalidArgument,
                    std::string("give a serve config (YAML) or --model-repository DIR (or both), or mount a "
                                "model repository at ") +
                        kKServeModelDir);
    if (control_mode != "none" || !load_models.empty())
      return Status(Errc::kInvalidArgument,
                    "--model-control-mode and --load-model need --model-repository DIR");
    return std::optional<RepositoryOptions>();
  }
  SYMPHONY_ASSIGN_OR_RETURN(
      RepositoryOptions r,
      repository_options(std::move(dir), control_mode, std::move(load_models), poll_secs, default_slo_ms));
  return std::optional<RepositoryOptions>(std::move(r));
}

Result<RepositoryOptions> repository_options(std::string dir, std::string_view control_mode,
                                             std::vector<std::string> load_models, double poll_secs,
                                             double default_slo_ms, const RepositoryOptionNames& names) {
  const auto mode = parse_model_control_mode(control_mode);
  const std::string given(control_mode);
  const auto bad = [](std::string_view name, const std::string& why) {
    return Status(Errc::kInvalidArgument, std::string(name) + ": " + why);
  };
  if (!mode) return bad(names.control_mode, "'" + given + "' is not none, poll or explicit");
  if (!load_models.empty() && *mode != ModelControlMode::kExplicit)
    return bad(names.load_models, "needs " + std::string(names.control_mode) + " explicit (in " + given +
                                      " mode every model loads)");
  if (!(poll_secs > 0) || !std::isfinite(poll_secs))
    return bad(names.poll_secs, "must be a positive number of seconds");
  if (!(default_slo_ms > 0) || !std::isfinite(default_slo_ms))
    return bad(names.default_slo_ms, "must be a positive number of milliseconds");
  RepositoryOptions o;
  o.dir = std::move(dir);
  o.mode = *mode;
  o.load_models = std::move(load_models);
  o.poll_interval = Duration::from_seconds(poll_secs);
  o.default_slo = Duration::from_seconds(default_slo_ms / 1000);
  o.devices_option = std::string(names.devices);
  return o;
}

Result<std::vector<server::DeviceSpec>> instance_devices(const RepositoryModel& m,
                                                         const std::vector<server::DeviceSpec>& devices,
                                                         std::string_view devices_option) {
  using server::DeviceKind;
  using server::DeviceSpec;
  std::vector<bool> chosen(devices.size(), false);
  const auto is_gpu = [](const DeviceSpec& d) { return d.kind != DeviceKind::kCpu; };
  const bool has_gpu = std::any_of(devices.begin(), devices.end(), is_gpu);
  const std::string listed = server::device_names(devices);
  const auto refuse = [&](const std::string& field, const std::string& why) {
    return Status(Errc::kInvalidArgument, m.config_path + ": " + field + ": " + why +
                                              " (the server's devices: " + listed + ", set by " +
                                              std::string(devices_option) + ")");
  };
  for (std::size_t i = 0; i < m.instance_groups.size(); ++i) {
    const repository::InstanceGroup& g = m.instance_groups[i];
    const std::string field = "instance_group[" + std::to_string(i) + "]";
    const bool gpu = g.kind == repository::InstanceKind::kGpu ||
                     (g.kind == repository::InstanceKind::kAuto && (!g.gpus.empty() || has_gpu));
    if (!gpu) {  // KIND_CPU, or KIND_AUTO on a server without GPUs
      bool any = false;
      for (std::size_t d = 0; d < devices.size(); ++d)
        if (!is_gpu(devices[d])) chosen[d] = any = true;
      if (!any) return refuse(field + ".kind", "the server has no CPU device");
      continue;
    }
    if (g.gpus.empty()) {
      if (!has_gpu) return refuse(field + ".kind", "the server has no GPU device");
      for (std::size_t d = 0; d < devices.size(); ++d)
        if (is_gpu(devices[d])) chosen[d] = true;
      continue;
    }
    for (const std::int32_t n : g.gpus) {
      bool any = false;
      for (std::size_t d = 0; d < devices.size(); ++d)
        if (is_gpu(devices[d]) && devices[d].index == n) chosen[d] = any = true;
      if (!any) return refuse(field + ".gpus", "the server has no GPU " + std::to_string(n));
    }
  }
  std::vector<DeviceSpec> out;
  if (m.instance_groups.empty()) return out;  // every device
  for (std::size_t d = 0; d < devices.size(); ++d)
    if (chosen[d]) out.push_back(devices[d]);
  return out;
}

Result<RepositoryServing> serving_options(const RepositoryModel& m, Duration default_slo,
                                          const std::vector<server::DeviceSpec>& devices,
                                          std::string_view devices_option) {
  if (m.versions.empty()) return Status(Errc::kInvalidArgument, m.config_path + ": no version to serve");
  return serving_options(m, m.versions.back(), default_slo, devices, devices_option);
}

Result<RepositoryServing> serving_options(const RepositoryModel& m, const repository::ModelVersion& version,
                                          Duration default_slo,
                                          const std::vector<server::DeviceSpec>& devices,
                                          std::string_view devices_option) {
  SYMPHONY_ASSIGN_OR_RETURN(repository::RequestTensors t, repository::request_tensors(m));
  RepositoryServing out;
  server::ModelOptions& o = out.model;
  SYMPHONY_ASSIGN_OR_RETURN(o.devices, instance_devices(m, devices, devices_option));
  o.name = m.name;
  o.model = m.name;
  o.path = version.model_path;
  o.version = std::to_string(version.version);
  o.slo = m.slo.value_or(default_slo);
  o.max_batch = t.max_batch;
  o.batch_dimension = t.batch_dimension;
  o.input_reshapes = std::move(t.input_reshapes);
  o.output_reshapes = std::move(t.output_reshapes);
  o.max_defer = m.max_defer;
  o.max_queue = m.max_queue_size.value_or(0);
  o.priority_levels = m.priority_levels;
  o.default_priority_level = m.default_priority_level;
  o.cuda_graphs = m.cuda_graphs;
  o.jit_profiling = m.jit_profiling;
  // Used by policy: triton only; several groups: the largest count on each of their devices.
  for (const std::int32_t b : m.preferred_batch_sizes)
    o.preferred_batch_sizes.push_back(static_cast<std::uint32_t>(b));
  for (const repository::InstanceGroup& g : m.instance_groups)
    o.instance_count = std::max(o.instance_count, g.count);
  const auto queue_policy = [](const repository::QueuePolicy& q) {
    TritonQueuePolicy p;
    p.timeout = q.timeout;
    p.action = q.delay ? TritonTimeoutAction::kDelay : TritonTimeoutAction::kReject;
    p.max_queue_size = q.max_queue_size;
    p.allow_timeout_override = q.allow_timeout_override;
    return p;
  };
  if (m.default_queue_policy) o.queue_policy.default_policy = queue_policy(*m.default_queue_policy);
  for (const auto& [level, q] : m.priority_queue_policy) o.queue_policy.levels[level] = queue_policy(q);
  for (const TensorSpec& sample : t.inputs) o.inputs.push_back(sample.to_string());
  for (const TensorSpec& sample : t.profile_inputs) o.profile_inputs.push_back(sample.to_string());
  out.protocol.input_names = std::move(t.input_names);
  out.protocol.output_names = std::move(t.output_names);
  out.protocol.default_budget = m.default_budget;
  out.protocol.config_proto = m.config_proto;  // instance_group as resolved: ServerService::describe
  out.protocol.version = o.version;
  return out;
}

ModelRepositoryManager::ModelRepositoryManager(ServeApp& app, RepositoryOptions options)
    : app_(app), opts_(std::move(options)) {}

ModelRepositoryManager::~ModelRepositoryManager() { stop(); }

void ModelRepositoryManager::log(const std::string& m) const {
  if (opts_.log) opts_.log(m);
}

Status ModelRepositoryManager::load_at_start() {
  std::error_code ec;
  if (!fs::is_directory(opts_.dir, ec))
    return Status(Errc::kNotFound, "--model-repository " + opts_.dir + ": no such folder");
  std::vector<std::string> names;
  const bool all = opts_.mode != ModelControlMode::kExplicit ||
                   (opts_.load_models.size() == 1 && opts_.load_models[0] == "*");
  if (all) {
    names = model_folders(opts_.dir);
  } else {
    for (const std::string& n : opts_.load_models) {
      if (n == "*")
        return Status(Errc::kInvalidArgument,
                      "--load-model '*' must be the only --load-model (it loads every model)");
      if (!fs::is_directory(fs::path(opts_.dir) / n, ec))
        return Status(Errc::kNotFound,
                      "--load-model " + n + ": no folder " + n + " in the model repository " + opts_.dir);
      names.push_back(n);
    }
  }
  for (const std::string& n : names)
    if (Status s = do_load(n, "", false); !s.ok()) log("model repository: " + s.message());
  return {};
}

void ModelRepositoryManager::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { run(); });
}

void ModelRepositoryManager::stop() {
  std::deque<std::function<void(bool)>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    dropped.swap(jobs_);
  }
  cv_.notify_all();
  for (auto& j : dropped) j(true);
  if (thread_.joinable()) thread_.join();
}

void ModelRepositoryManager::post(std::function<void(bool)> job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      jobs_.push_back(std::move(job));
      cv_.notify_all();
      return;
    }
  }
  job(true);
}

void ModelRepositoryManager::run() {
  // A load reads and optimizes the model on this thread, CPU work beside the
  // models serving: at nice 19 it takes the CPU they leave. Its batches
  // (warm-up, profile) run under device leases, on the server's thread for
  // them at normal priority (docs/serving.md).
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
  using Clock = std::chrono::steady_clock;
  auto next_poll = Clock::now() + std::chrono::nanoseconds(opts_.poll_interval.ns());
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (!jobs_.empty()) {
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job(false);
      lock.lock();
      continue;
    }
    const bool polls = opts_.mode == ModelControlMode::kPoll;
    if (polls && Clock::now() >= next_poll) {
      lock.unlock();
      poll();
      lock.lock();
      next_poll = Clock::now() + std::chrono::nanoseconds(opts_.poll_interval.ns());
      continue;
    }
    if (polls)
      cv_.wait_until(lock, next_poll);
    else
      cv_.wait(lock);
  }
}

Status ModelRepositoryManager::check_control(std::string_view what) const {
  if (opts_.mode == ModelControlMode::kExplicit) return {};
  return Status(Errc::kFailedPrecondition,
                std::string(what) + " is not allowed: the server runs with --model-control-mode " +
                    std::string(control_mode_name(opts_.mode)) +
                    " (start it with --model-control-mode explicit to load and unload models)");
}

void ModelRepositoryManager::load(std::string name, std::string config_json, Done done) {
  if (Status s = check_control("loading model '" + name + "'"); !s.ok()) return done(s);
  post([this, name = std::move(name), config = std::move(config_json), done = std::move(done)](bool stopped) {
    if (stopped)
      return done(
          Status(Errc::kFailedPrecondition, "the server is stopping; model '" + name + "' was not loaded"));
    done(do_load(name, config, /*force=*/!config.empty()));
  });
}

void ModelRepositoryManager::unload(std::string name, Done done) {
  if (Status s = check_control("unloading model '" + name + "'"); !s.ok()) return done(s);
  post([this, name = std::move(name), done = std::move(done)](bool stopped) {
    if (stopped)
      return done(
          Status(Errc::kFailedPrecondition, "the server is stopping; model '" + name + "' was not unloaded"));
    done(do_unload(name));
  });
}

Status ModelRepositoryManager::load_version(const RepositoryModel& m, const repository::ModelVersion& v,
                                            std::set<std::string>* used, Version* out) {
  const std::string version = std::to_string(v.version);
  Result<RepositoryServing> serving =
      serving_options(m, v, opts_.default_slo, app_.server().devices(), opts_.devices_option);
  if (!serving.ok()) return serving.status();
  // "<model>/<version>" (a folder's name has no '/'), and "#2", "#3", ...
  // while the server still holds the version loaded before.
  std::string server_name = m.name + "/" + version;
  for (int n = 2; used->count(server_name); ++n)
    server_name = m.name + "/" + version + "#" + std::to_string(n);
  serving->model.name = server_name;
  log("model repository: loading " + m.name + " version " + version);
  if (Status s = app_.load_version(serving->model); !s.ok())
    return Status(s.code(), "version " + version + ": " + s.message());
  used->insert(server_name);
  out->protocol = std::move(serving->protocol);
  out->protocol.server_name = std::move(server_name);
  out->state = State::kReady;
  out->reason.clear();
  return {};
}

Status ModelRepositoryManager::do_load(const std::string& name, const std::string& config_json, bool force) {
  const std::string who = "load of model '" + name + "' failed: ";
  const bool odd = std::any_of(name.begin(), name.end(), [](char c) {
    return c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20;
  });
  if (name.empty() || odd || name == "." || name == "..")
    return Status(Errc::kInvalidArgument, who + "'" + name + "' is not a model folder's name");
  const std::string dir = (fs::path(opts_.dir) / name).string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!entries_.count(name) || !entries_[name].loaded()) entries_.erase(name);
    return Status(Errc::kNotFound, who + "no folder " + dir + " in the model repository");
  }
  Result<RepositoryModel> read = config_json.empty()
                                     ? repository::read_model_dir(dir)
                                     : repository::read_model_dir_with_config(dir, config_json);
  Result<RepositoryServing> serving =
      read.ok() ? serving_options(*read, opts_.default_slo, app_.server().devices(), opts_.devices_option)
                : read.status();
  const std::string fp = serving.ok() ? fingerprint(*read) : "";
  std::map<std::int64_t, Version> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[name];
    if (!serving.ok()) {
      // A model that serves keeps serving the files it was loaded from.
      if (!e.loaded()) {
        e.state = State::kUnavailable;
        e.reason = serving.status().message();
        e.versions.clear();
        e.fingerprint.clear();
      }
      return Status(Errc::kInvalidArgument, who + serving.status().message());
    }
    old = e.versions;
  }
  // The new set: versions whose file and config did not change are kept as
  // they are; the others load while the old set serves.
  std::map<std::int64_t, Version> next;
  std::vector<const repository::ModelVersion*> todo;
  for (const repository::ModelVersion& v : read->versions) {
    const std::string vfp = version_fingerprint(*read, v);
    auto o = old.find(v.version);
    if (!force && o != old.end() && o->second.served() && o->second.fingerprint == vfp) {
      next[v.version] = o->second;
      next[v.version].reason.clear();
      continue;
    }
    next[v.version] = Version{State::kLoading, "", vfp, {}};
    todo.push_back(&v);
  }
  for (const repository::UnavailableVersion& v : read->unavailable_versions)
    next[v.version] = Version{State::kUnavailable, v.reason, "", {}};
  std::vector<std::string> dropped;  // served now, not in the new set
  for (const auto& [v, ver] : old)
    if (ver.served() && !(next.count(v) && next[v].protocol.server_name == ver.protocol.server_name))
      dropped.push_back(ver.protocol.server_name);
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[name];
    if (todo.empty() && dropped.empty()) {  // nothing to load: unchanged, or only the reasons
      e.versions = std::move(next);
      e.fingerprint = fp;
      return {};
    }
    // Shown while loading: what serves as it is, the new versions LOADING.
    for (const repository::ModelVersion* v : todo)
      if (!e.versions.count(v->version) || !e.versions[v->version].served())
        e.versions[v->version] = next[v->version];
  }
  for (const std::string& f : read->unused_fields)
    log("model '" + name + "': " + f + " is accepted but not used by Symphony" +
        (f == "dynamic_batching.preferred_batch_size" ||
                 f.starts_with("dynamic_batching.priority_queue_policy") ||
                 f.starts_with("dynamic_batching.default_queue_policy.")
             ? " (policy: triton uses it)"
             : ""));
  for (std::size_t i = 0; i < read->instance_groups.size(); ++i) {
    if (read->instance_groups[i].count <= 1) continue;
    log("model '" + name + "': instance_group[" + std::to_string(i) + "].count " +
        std::to_string(read->instance_groups[i].count) +
        " is accepted but not used: Symphony runs one batch at a time on each device, the next one queued "
        "behind it (policy: triton runs that many instances on each device)");
    break;
  }

  std::set<std::string> used;
  for (const auto& [_, ver] : old)
    if (ver.served()) used.insert(ver.protocol.server_name);
  Status failed;
  std::vector<std::string> loaded;  // by this load
  for (const repository::ModelVersion* v : todo) {
    Version& nv = next[v->version];
    if (Status s = load_version(*read, *v, &used, &nv); !s.ok()) {
      nv.state = State::kUnavailable;
      nv.reason = s.message();
      if (failed.ok()) failed = Status(Errc::kInvalidArgument, who + s.message());
      continue;
    }
    loaded.push_back(nv.protocol.server_name);
  }
  std::vector<ProtocolModelOptions> routes;
  for (const auto& [_, ver] : next)
    if (ver.served()) routes.push_back(ver.protocol);
  const bool served_before =
      std::any_of(old.begin(), old.end(), [](const auto& kv) { return kv.second.served(); });
  if (!failed.ok() && served_before) {
    // All or nothing: the old set serves on; what this load loaded goes.
    for (const std::string& n : loaded) (void)app_.unload_version(n);
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[name];
    e.versions = old;
    for (const repository::ModelVersion* v : todo) {
      const Version& nv = next[v->version];
      if (nv.state != State::kUnavailable) continue;
      if (old.count(v->version) && old[v->version].served())
        e.versions[v->version].reason = "the reload failed (the previous files serve on): " + nv.reason;
      else
        e.versions[v->version] = nv;
    }
    return failed;
  }
  if (routes.empty()) {  // a first load whose every version failed
    std::lock_guard<std::mutex> lock(mu_);
    entries_[name].versions = next;
    return failed;
  }
  if (Status s = app_.serve_versions(name, std::move(routes)); !s.ok()) {
    // The front refused the new set (not expected): the old one serves on.
    for (const std::string& n : loaded) (void)app_.unload_version(n);
    std::lock_guard<std::mutex> lock(mu_);
    entries_[name].versions = old;
    return Status(Errc::kInvalidArgument, who + s.message());
  }
  // The front serves the new set: the old versions' queued requests end.
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[name];
    e.versions = next;
    e.fingerprint = fp;
    e.last_error.clear();
    for (const auto& [v, ver] : old)
      if (ver.served() && !next.count(v)) e.versions[v] = Version{State::kUnloading, "", "", {}};
  }
  for (const std::string& n : dropped) (void)app_.unload_version(n);
  {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[name];
    for (auto it = e.versions.begin(); it != e.versions.end();)
      it = it->second.state == State::kUnloading ? e.versions.erase(it) : std::next(it);
  }
  for (const auto& [v, ver] : next)
    if (ver.served()) log("model repository: " + name + " version " + std::to_string(v) + " is ready");
  return failed;
}

Status ModelRepositoryManager::do_unload(const std::string& name) {
  std::vector<std::string> served;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(name);
    if (it == entries_.end() || !it->second.loaded())
      return Status(Errc::kInvalidArgument, "unload of model '" + name + "' failed: it is not loaded" +
                                                (it == entries_.end() ? " (no such model is known)" : ""));
    for (auto& [_, v] : it->second.versions) {
      if (v.served()) served.push_back(v.protocol.server_name);
      v.state = State::kUnloading;
      v.reason.clear();
    }
  }
  // The front refuses the model's new requests first; the server then waits
  // until each version's queued requests have run or expired and frees it.
  Status s = app_.serve_versions(name, {});
  for (const std::string& n : served)
    if (Status r = app_.unload_version(n); !r.ok() && s.ok()) s = r;
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = entries_[name];
  for (auto& [_, v] : e.versions) v = Version{State::kUnavailable, "unloaded", "", {}};
  e.fingerprint.clear();
  if (!s.ok()) return Status(Errc::kInvalidArgument, "unload of model '" + name + "' failed: " + s.message());
  log("model repository: " + name + " unloaded");
  return {};
}

void ModelRepositoryManager::poll() {
  const std::vector<std::string> folders = model_folders(opts_.dir);
  const std::set<std::string> present(folders.begin(), folders.end());
  std::vector<std::string> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [n, e] : entries_)
      if (!present.count(n)) gone.push_back(n);
  }
  for (const std::string& n : gone) {
    bool loaded = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      loaded = entries_[n].loaded();
    }
    if (loaded) (void)do_unload(n);
    std::lock_guard<std::mutex> lock(mu_);
    entries_.erase(n);
  }
  for (const std::string& n : folders) {
    // Files that have not changed since the last try are left alone: a model
    // that failed is tried again, and a broken change to a served model is
    // reported again, only once its files change.
    Result<RepositoryModel> r = repository::read_model_dir((fs::path(opts_.dir) / n).string());
    const std::string fp = r.ok() ? fingerprint(*r) : "error: " + r.status().message();
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = entries_.find(n);
      if (it != entries_.end() && (fp == it->second.fingerprint || fp == it->second.last_error)) continue;
    }
    if (Status s = do_load(n, "", false); !s.ok()) {
      log("model repository: " + s.message());
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = entries_.find(n); it != entries_.end()) it->second.last_error = fp;
    }
  }
}

std::vector<ModelRepositoryManager::IndexEntry> ModelRepositoryManager::index(bool ready_only) const {
  std::vector<IndexEntry> out;
  std::set<std::string> known;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [n, e] : entries_) {
      known.insert(n);
      if (e.versions.empty()) {  // the folder cannot be read
        if (!ready_only) out.push_back({n, "", std::string(kState[static_cast<int>(e.state)]), e.reason});
        continue;
      }
      for (const auto& [v, ver] : e.versions)
        if (!ready_only || ver.state == State::kReady)
          out.push_back({n, std::to_string(v), std::string(kState[static_cast<int>(ver.state)]), ver.reason});
    }
  }
  if (!ready_only)
    for (const std::string& n : model_folders(opts_.dir))
      if (!known.count(n)) out.push_back({n, "", std::string(kState[1]), "not loaded"});
  std::stable_sort(out.begin(), out.end(),
                   [](const IndexEntry& a, const IndexEntry& b) { return a.name < b.name; });
  return out;
}

}  // namespace symphony::serve
