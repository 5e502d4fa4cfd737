// cluster.yaml = a config of the simulator's format (symphony::config) + a
// `cluster:` section (see cluster_config.hpp).
#include "symphony/cluster/cluster_config.hpp"

#include <charconv>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "symphony/cluster/cluster_repository.hpp"
#include "symphony/config/files.hpp"
#include "symphony/config/yaml_reader.hpp"
#include "symphony/runtime/runtime_config.hpp"

namespace symphony::cluster {
namespace {

namespace fs = std::filesystem;

// Blanks the lines of the top-level `cluster:` key (the key's line and the
// indented or empty lines after it), keeping every other line where it was.
std::string cut_cluster_section(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  bool inside = false;
  while (std::getline(in, line)) {
    const bool top_level = !line.empty() && line[0] != ' ' && line[0] != '\t' && line[0] != '#';
    if (top_level) inside = line.rfind("cluster:", 0) == 0 || line.rfind("cluster :", 0) == 0;
    out += inside ? "" : line;
    out += '\n';
  }
  return out;
}

// cluster.models: {name: {input|inputs, output|outputs}}.
std::map<std::string, ModelTensors> parse_models(const config::YamlReader& r, const YAML::Node& n) {
  if (!n.IsMap()) r.fail(n, "cluster.models", "must be a map of model name to {inputs, outputs}");
  std::map<std::string, ModelTensors> out;
  for (const auto& kv : n) {
    const std::string name = kv.first.as<std::string>();
    const std::string key = "cluster.models." + name;
    const YAML::Node m = kv.second;
    if (!m.IsMap()) r.fail(m, key, "must be a map with input(s) and/or output(s)");
    r.check_keys(m, key, {"input", "inputs", "output", "outputs"});
    ModelTensors t;
    for (const auto& f : m) {
      const std::string k = f.first.as<std::string>();
      const bool in = k == "input" || k == "inputs";
      std::vector<TensorSpec>& list = in ? t.inputs : t.outputs;
      if (!list.empty())
        r.fail(f.first, key + "." + k,
               std::string("give ") + (in ? "input or inputs" : "output or outputs") + ", not both");
      std::vector<YAML::Node> items;
      if (f.second.IsSequence()) {
        for (const auto& e : f.second) items.push_back(e);
        if (items.empty()) r.fail(f.second, key + "." + k, "must not be empty");
      } else if (f.second.IsScalar()) {
        items.push_back(f.second);
      } else {
        r.fail(f.second, key + "." + k, "must be a tensor spec like \"float32[3,64,64]\" or a list of them");
      }
      for (const YAML::Node& e : items) {
        if (!e.IsScalar()) r.fail(e, key + "." + k, "must be a tensor spec like \"float32[3,64,64]\"");
        Result<TensorSpec> d = parse_tensor_spec(e.Scalar());
        if (!d.ok()) r.fail(e, key + "." + k, d.status().message());
        list.push_back(std::move(*d));
      }
    }
    out[name] = std::move(t);
  }
  return out;
}

Status no_token(const std::string& origin) {
  return Status(Errc::kInvalidArgument,
                origin +
                    ": cluster.token: a cluster needs a shared token (cluster: {token: "
                    "...} or token_file, or SYMPHONY_CLUSTER_TOKEN in the environment)");
}

ClusterSettings parse_section(const config::YamlReader& r, const YAML::Node& c) {
  ClusterSettings s;
  r.check_keys(c, "cluster",
               {"token",
                "token_file",
                "heartbeat_ms",
                "heartbeat_timeout_ms",
                "learn_delays",
                "recalibrate",
                "delay_percentile",
                "delay_window",
                "delay_update_ms",
                "delay_max_age_ms",
                "shards",
                "max_gpus",
                "max_requests",
                "max_input_bytes",
                "pool_region_idle_ms",
                "ucx_tls",
                "progress_spin_us",
                "inject_delay_us",
                "metrics",
                "schedulers",
                "models",
                "frontend_admission",
                "admission_backlog_share",
                "defer_without_history"});
  if (c["token"] && c["token_file"])
    r.fail(c["token_file"], "cluster.token_file", "give token or token_file, not both");
  if (c["token"]) s.token = r.string(c["token"], "cluster.token");
  if (const YAML::Node n = c["token_file"]) {
    fs::path p = r.string(n, "cluster.token_file");
    if (p.is_relative() && !r.base_dir().empty()) p = fs::path(r.base_dir()) / p;
    std::ifstream f(p);
    if (!f) r.fail(n, "cluster.token_file", "cannot read '" + p.string() + "'");
    std::getline(f, s.token);
  }
  if (s.token.size() > 256)
    r.fail(c["token"] ? c["token"] : c["token_file"], "cluster.token", "longer than 256 bytes");
  if (c["heartbeat_ms"]) s.heartbeat_interval = r.millis(c["heartbeat_ms"], "cluster.heartbeat_ms", 1);
  if (c["heartbeat_timeout_ms"])
    s.heartbeat_timeout = r.millis(c["heartbeat_timeout_ms"], "cluster.heartbeat_timeout_ms", 10);
  if (s.heartbeat_timeout <= s.heartbeat_interval)
    r.fail(c["heartbeat_timeout_ms"] ? c["heartbeat_timeout_ms"] : c, "cluster.heartbeat_timeout_ms",
           "must be longer than heartbeat_ms");
  if (const YAML::Node n = c["learn_delays"]) s.learn_delays = r.boolean(n, "cluster.learn_delays");
  if (const YAML::Node n = c["recalibrate"]) s.recalibrate = r.boolean(n, "cluster.recalibrate");
  if (const YAML::Node n = c["frontend_admission"])
    s.frontend_admission = r.boolean(n, "cluster.frontend_admission");
  if (const YAML::Node n = c["admission_backlog_share"])
    s.admission_backlog_share = r.number_in(n, "cluster.admission_backlog_share", kMinBacklogShare, 1);
  if (const YAML::Node n = c["defer_without_history"])
    s.defer_without_history = r.boolean(n, "cluster.defer_without_history");
  if (const YAML::Node n = c["delay_percentile"]) {
    s.delay_percentile = r.number(n, "cluster.delay_percentile");
    if (s.delay_percentile <= 0 || s.delay_percentile > 1)
      r.fail(n, "cluster.delay_percentile", "must be in (0, 1]");
  }
  if (c["delay_window"])
    s.delay_window =
        static_cast<std::uint32_t>(r.integer(c["delay_window"], "cluster.delay_window", 8, 1u << 20));
  if (c["delay_update_ms"]) s.delay_update = r.millis(c["delay_update_ms"], "cluster.delay_update_ms", 1);
  if (c["delay_max_age_ms"])
    s.delay_max_age = r.millis(c["delay_max_age_ms"], "cluster.delay_max_age_ms", 10);
  if (c["shards"]) s.shards = static_cast<std::uint32_t>(r.integer(c["shards"], "cluster.shards", 1, 64));
  if (c["max_gpus"])
    s.max_gpus = static_cast<std::uint32_t>(r.integer(c["max_gpus"], "cluster.max_gpus", 1, 1u << 16));
  if (c["max_requests"])
    s.max_requests =
        static_cast<std::uint32_t>(r.integer(c["max_requests"], "cluster.max_requests", 16, 1u << 24));
  if (c["max_input_bytes"])
    s.max_input_bytes =
        static_cast<std::uint32_t>(r.integer(c["max_input_bytes"], "cluster.max_input_bytes", 1, 1u << 30));
  if (c["pool_region_idle_ms"])
    s.pool_region_idle = r.millis(c["pool_region_idle_ms"], "cluster.pool_region_idle_ms", 0);
  if (c["ucx_tls"]) s.ucx_tls = r.string(c["ucx_tls"], "cluster.ucx_tls");
  if (const YAML::Node n = c["metrics"]) {
    s.metrics = r.string(n, "cluster.metrics");
    if (s.metrics.find(':') == std::string::npos)
      r.fail(n, "cluster.metrics", "'" + s.metrics + "' is not HOST:PORT (e.g. 127.0.0.1:9464; port 0: any)");
  }
  if (const YAML::Node n = c["models"]) s.models = parse_models(r, n);
  if (const YAML::Node n = c["schedulers"]) {
    if (!n.IsSequence() || n.size() == 0)
      r.fail(n, "cluster.schedulers", "must be a list of HOST:PORT (the primary first, then the hot spares)");
    if (n.size() > kMaxClusterSchedulers)
      r.fail(n, "cluster.schedulers",
             "at most " + std::to_string(kMaxClusterSchedulers) + " schedulers, got " +
                 std::to_string(n.size()));
    for (const YAML::Node& e : n) {
      if (!e.IsScalar()) r.fail(e, "cluster.schedulers", "each entry must be a string HOST:PORT");
      const std::string a = e.Scalar();
      const std::size_t colon = a.rfind(':');
      const std::string port = colon == std::string::npos ? "" : a.substr(colon + 1);
      const bool digits =
          !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
      if (colon == std::string::npos || colon == 0 || !digits || std::stoul(port) == 0 ||
          std::stoul(port) > 65535)
        r.fail(e, "cluster.schedulers", "'" + a + "' is not HOST:PORT with a port in 1..65535");
      if (std::find(s.schedulers.begin(), s.schedulers.end(), a) != s.schedulers.end())
        r.fail(e, "cluster.schedulers", "'" + a + "' is listed twice");
      s.schedulers.push_back(a);
    }
  }
  if (const YAML::Node n = c["progress_spin_us"])
    s.progress_spin = Duration::from_us(r.number_in(n, "cluster.progress_spin_us", 0, 10000));
  if (const YAML::Node n = c["inject_delay_us"]) {
    const double v = r.number(n, "cluster.inject_delay_us");
    if (v < 0 || v > 10e6) r.fail(n, "cluster.inject_delay_us", "must be in [0, 10000000]");
    s.inject_delay = Duration::from_us(v);
  }
  return s;
}

// What the scheduler process adds to the simulator's checks of the
// `subclusters:` section (symphony::config parses it).
void check_subclusters(const config::YamlReader& r, const YAML::Node& n,
                       const partition::SubClusterConfig& sc) {
  if (sc.spec.count > kMaxClusterSubClusters)
    r.fail(n["count"], "subclusters.count",
           "the scheduler runs at most " + std::to_string(kMaxClusterSubClusters) + " sub-clusters, got " +
               std::to_string(sc.spec.count));
  const Duration e = sc.spec.epoch;
  if (e > Duration::zero() && e < kMinClusterEpoch)
    r.fail(n["epoch_s"], "subclusters.epoch_s",
           "an epoch re-partitions and moves models; at least " + format_seconds(kMinClusterEpoch) +
               " s (0: place the models once), got " + format_seconds(e));
}

}  // namespace

Result<ClusterConfig> parse_cluster_config(const std::string& yaml_text, const std::string& origin,
                                           const std::string& base_dir, bool need_token,
                                           const ClusterRepository* repository) {
  const config::YamlReader r(origin, base_dir);
  ClusterConfig cc;
  YAML::Node root;
  config::GivenModels given;
  SYMPHONY_RETURN_IF_ERROR(config::read_status([&] {
    root = r.load(yaml_text);
    if (root.IsMap() && root["cluster"]) {
      cc.cluster = parse_section(r, root["cluster"]);
      cc.has_cluster_section = true;
    }
    if (!repository) return;
    given.from = "the model repository " + repository->dir + " (--model-repository)";
    if (const YAML::Node n = cc.has_cluster_section ? root["cluster"]["models"] : YAML::Node(); n)
      r.fail(n, "cluster.models", "the models' tensors come from " + given.from + ": remove this section");
    for (const ClusterRepositoryModel& m : repository->models) {
      given.models.push_back(m.config);
      given.sources.push_back("repository:" + m.config_path);
      cc.cluster.models[m.config.name] = m.tensors;
      cc.model_versions[m.config.name] = std::to_string(m.version);
      if (m.config.name != m.model) cc.protocol_models[m.config.name] = m.model;
      if (!m.instance_groups.empty()) cc.instance_groups[m.config.name] = m.instance_groups;
      if (m.default_priority_level) cc.default_priority_levels[m.config.name] = m.default_priority_level;
    }
    for (const UnservedVersion& v : repository->unserved)
      cc.unserved_versions.push_back({v.model, std::to_string(v.version), v.reason});
    cc.model_repository = repository->dir;
  }));
  SYMPHONY_ASSIGN_OR_RETURN(cc.sim, config::parse_config(cut_cluster_section(yaml_text), origin, base_dir,
                                                         repository ? &given : nullptr));
  for (std::size_t i = 0; i < cc.sim.model_info.size() && i < cc.sim.spec.models.size(); ++i)
    if (const std::uint32_t d = cc.sim.model_info[i].default_priority_level)
      cc.default_priority_levels[cc.sim.spec.models[i].name] = d;
  SYMPHONY_RETURN_IF_ERROR(config::read_status([&] {
    for (const auto& [name, t] : cc.cluster.models) {
      bool known = false;
      for (const ModelConfig& m : cc.sim.spec.models) known |= m.name == name;
      if (!known) {
        std::string names;
        for (const ModelConfig& m : cc.sim.spec.models) names += (names.empty() ? "" : ", ") + m.name;
        const YAML::Node models = root["cluster"]["models"];
        YAML::Node at = models;
        for (const auto& kv : models)
          if (kv.first.as<std::string>() == name) at = kv.first;
        r.fail(at, "cluster.models." + name,
               "no model '" + name + "' in models: (the cluster serves: " + names + ")");
      }
    }
    if (cc.sim.subclusters) check_subclusters(r, root["subclusters"], *cc.sim.subclusters);
  }));
  if (need_token && effective_token(cc.cluster).empty()) return no_token(origin);
  return cc;
}

Result<ClusterConfig> load_cluster_config(const std::string& path, bool need_token,
                                          const ClusterRepository* repository) {
  SYMPHONY_ASSIGN_OR_RETURN(const std::string text, config::read_file(path, "the file"));
  const std::string dir = fs::path(path).parent_path().string();
  return parse_cluster_config(text, path, dir, need_token, repository);
}

Result<ClusterSettings> load_cluster_settings(const std::string& path, bool need_token) {
  SYMPHONY_ASSIGN_OR_RETURN(const std::string text, config::read_file(path, "the file"));
  const config::YamlReader r(path, fs::path(path).parent_path().string());
  ClusterSettings s;
  SYMPHONY_RETURN_IF_ERROR(config::read_status([&] {
    const YAML::Node root = r.load(text);
    if (root.IsMap() && root["cluster"]) s = parse_section(r, root["cluster"]);
  }));
  if (need_token && effective_token(s).empty()) return no_token(path);
  return s;
}

bool is_gpu_device(std::string_view device) {
  if (const std::size_t slash = device.rfind('/'); slash != std::string_view::npos)
    device.remove_prefix(slash + 1);
  return device.substr(0, device.find(':')) != "cpu";
}

bool has_gpu_device(const std::vector<std::string>& devices) {
  return std::any_of(devices.begin(), devices.end(), [](const std::string& d) { return is_gpu_device(d); });
}

bool groups_select(const std::vector<DeviceGroup>& groups, std::string_view device, bool backend_has_gpu) {
  if (groups.empty()) return true;
  if (const std::size_t slash = device.rfind('/'); slash != std::string_view::npos)
    device.remove_prefix(slash + 1);
  const bool gpu = is_gpu_device(device);
  std::int32_t number = 0;
  if (const std::size_t colon = device.find(':'); colon != std::string_view::npos)
    std::from_chars(device.data() + colon + 1, device.data() + device.size(), number);
  for (const DeviceGroup& g : groups) {
    const bool wants_gpu = g.kind == DeviceGroup::Kind::kGpu ||
                           (g.kind == DeviceGroup::Kind::kAuto && (!g.gpus.empty() || backend_has_gpu));
    if (!wants_gpu && !gpu) return true;
    if (wants_gpu && gpu &&
        (g.gpus.empty() || std::find(g.gpus.begin(), g.gpus.end(), number) != g.gpus.end()))
      return true;
  }
  return false;
}

std::string effective_token(const ClusterSettings& s) {
  if (const char* env = std::getenv("SYMPHONY_CLUSTER_TOKEN"); env && *env) return env;
  return s.token;
}

}  // namespace symphony::cluster
