// cluster.yaml = a config of the simulator's format (symphony::config) + a
// `cluster:` section (see cluster_config.hpp).
#include "symphony/cluster/cluster_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace symphony::cluster {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& origin, const YAML::Node& at, const std::string& key,
                       const std::string& msg) {
  std::string where = origin;
  const YAML::Mark m = at.Mark();
  if (!m.is_null()) where += ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
  throw config::ConfigError(where + ": " + key + ": " + msg);
}

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

double number(const std::string& origin, const YAML::Node& n, const std::string& key) {
  try {
    const double v = n.as<double>();
    if (!std::isfinite(v)) fail(origin, n, key, "must be a finite number");
    return v;
  } catch (const YAML::Exception&) {
    fail(origin, n, key, "must be a number, got '" + n.as<std::string>("?") + "'");
  }
}

std::uint64_t integer(const std::string& origin, const YAML::Node& n, const std::string& key,
                      std::uint64_t lo, std::uint64_t hi) {
  const double v = number(origin, n, key);
  if (v != std::floor(v) || v < static_cast<double>(lo) || v > static_cast<double>(hi))
    fail(origin, n, key,
         "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
             n.as<std::string>());
  return static_cast<std::uint64_t>(v);
}

Duration millis(const std::string& origin, const YAML::Node& n, const std::string& key, double lo) {
  const double v = number(origin, n, key);
  if (v < lo) fail(origin, n, key, "must be at least " + std::to_string(lo) + " ms");
  return Duration::from_ms(v);
}

struct DtypeName {
  std::string_view name, canonical;
  std::size_t bytes;
};
constexpr DtypeName kDtypes[] = {
    {"float32", "float32", 4}, {"float", "float32", 4},   {"float64", "float64", 8}, {"double", "float64", 8},
    {"float16", "float16", 2}, {"half", "float16", 2},    {"bfloat16", "bfloat16", 2}, {"int64", "int64", 8},
    {"long", "int64", 8},      {"int32", "int32", 4},     {"int", "int32", 4},       {"int16", "int16", 2},
    {"int8", "int8", 1},       {"uint8", "uint8", 1},     {"bool", "bool", 1},
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// cluster.models: {name: {input|inputs, output|outputs}}.
std::map<std::string, ModelTensors> parse_models(const std::string& origin, const YAML::Node& n) {
  if (!n.IsMap()) fail(origin, n, "cluster.models", "must be a map of model name to {inputs, outputs}");
  std::map<std::string, ModelTensors> out;
  for (const auto& kv : n) {
    const std::string name = kv.first.as<std::string>();
    const std::string key = "cluster.models." + name;
    const YAML::Node m = kv.second;
    if (!m.IsMap()) fail(origin, m, key, "must be a map with input(s) and/or output(s)");
    ModelTensors t;
    for (const auto& f : m) {
      const std::string k = f.first.as<std::string>();
      const bool in = k == "input" || k == "inputs", outp = k == "output" || k == "outputs";
      if (!in && !outp)
        fail(origin, f.first, key + "." + k, "unknown key '" + k + "' (known keys: input, inputs, output, outputs)");
      std::vector<TensorDecl>& list = in ? t.inputs : t.outputs;
      if (!list.empty())
        fail(origin, f.first, key + "." + k, std::string("give ") + (in ? "input or inputs" : "output or outputs") +
                                                 ", not both");
      std::vector<YAML::Node> items;
      if (f.second.IsSequence()) {
        for (const auto& e : f.second) items.push_back(e);
        if (items.empty()) fail(origin, f.second, key + "." + k, "must not be empty");
      } else if (f.second.IsScalar()) {
        items.push_back(f.second);
      } else {
        fail(origin, f.second, key + "." + k, "must be a tensor spec like \"float32[3,64,64]\" or a list of them");
      }
      for (const YAML::Node& e : items) {
        if (!e.IsScalar()) fail(origin, e, key + "." + k, "must be a tensor spec like \"float32[3,64,64]\"");
        Result<TensorDecl> d = parse_tensor_decl(e.as<std::string>());
        if (!d.ok()) fail(origin, e, key + "." + k, d.status().message());
        list.push_back(std::move(*d));
      }
    }
    out[name] = std::move(t);
  }
  return out;
}

ClusterSettings parse_section(const std::string& origin, const std::string& base_dir, const YAML::Node& c) {
  static const std::set<std::string> known = {"token",
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
                                              "ucx_tls",
                                              "progress_spin_us",
                                              "inject_delay_us",
                                              "metrics",
                                              "schedulers",
                                              "models"};
  ClusterSettings s;
  if (!c.IsMap()) fail(origin, c, "cluster", "must be a map");
  std::set<std::string> seen;
  for (const auto& kv : c) {
    const std::string k = kv.first.as<std::string>();
    if (!seen.insert(k).second) fail(origin, kv.first, "cluster." + k, "duplicate key");
    if (!known.count(k)) {
      std::string list;
      for (const std::string& x : known) list += (list.empty() ? "" : ", ") + x;
      fail(origin, kv.first, "cluster." + k, "unknown key '" + k + "' (known keys: " + list + ")");
    }
  }
  if (c["token"] && c["token_file"])
    fail(origin, c["token_file"], "cluster.token_file", "give token or token_file, not both");
  if (c["token"]) s.token = c["token"].as<std::string>();
  if (const YAML::Node n = c["token_file"]) {
    fs::path p = n.as<std::string>();
    if (p.is_relative() && !base_dir.empty()) p = fs::path(base_dir) / p;
    std::ifstream f(p);
    if (!f) fail(origin, n, "cluster.token_file", "cannot read '" + p.string() + "'");
    std::getline(f, s.token);
  }
  if (s.token.size() > 256)
    fail(origin, c["token"] ? c["token"] : c["token_file"], "cluster.token", "longer than 256 bytes");
  if (c["heartbeat_ms"]) s.heartbeat_interval = millis(origin, c["heartbeat_ms"], "cluster.heartbeat_ms", 1);
  if (c["heartbeat_timeout_ms"])
    s.heartbeat_timeout = millis(origin, c["heartbeat_timeout_ms"], "cluster.heartbeat_timeout_ms", 10);
  if (s.heartbeat_timeout <= s.heartbeat_interval)
    fail(origin, c["heartbeat_timeout_ms"] ? c["heartbeat_timeout_ms"] : c, "cluster.heartbeat_timeout_ms",
         "must be longer than heartbeat_ms");
  if (const YAML::Node n = c["learn_delays"]) {
    try {
      s.learn_delays = n.as<bool>();
    } catch (const YAML::Exception&) {
      fail(origin, n, "cluster.learn_delays", "must be true or false");
    }
  }
  if (const YAML::Node n = c["recalibrate"]) {
    try {
      s.recalibrate = n.as<bool>();
    } catch (const YAML::Exception&) {
      fail(origin, n, "cluster.recalibrate", "must be true or false");
    }
  }
  if (const YAML::Node n = c["delay_percentile"]) {
    s.delay_percentile = number(origin, n, "cluster.delay_percentile");
    if (s.delay_percentile <= 0 || s.delay_percentile > 1)
      fail(origin, n, "cluster.delay_percentile", "must be in (0, 1]");
  }
  if (c["delay_window"])
    s.delay_window =
        static_cast<std::uint32_t>(integer(origin, c["delay_window"], "cluster.delay_window", 8, 1u << 20));
  if (c["delay_update_ms"])
    s.delay_update = millis(origin, c["delay_update_ms"], "cluster.delay_update_ms", 1);
  if (c["delay_max_age_ms"])
    s.delay_max_age = millis(origin, c["delay_max_age_ms"], "cluster.delay_max_age_ms", 10);
  if (c["shards"])
    s.shards = static_cast<std::uint32_t>(integer(origin, c["shards"], "cluster.shards", 1, 64));
  if (c["max_gpus"])
    s.max_gpus = static_cast<std::uint32_t>(integer(origin, c["max_gpus"], "cluster.max_gpus", 1, 1u << 16));
  if (c["max_requests"])
    s.max_requests =
        static_cast<std::uint32_t>(integer(origin, c["max_requests"], "cluster.max_requests", 16, 1u << 24));
  if (c["max_input_bytes"])
    s.max_input_bytes = static_cast<std::uint32_t>(
        integer(origin, c["max_input_bytes"], "cluster.max_input_bytes", 1, 1u << 30));
  if (c["ucx_tls"]) s.ucx_tls = c["ucx_tls"].as<std::string>();
  if (const YAML::Node n = c["metrics"]) {
    s.metrics = n.as<std::string>();
    if (s.metrics.find(':') == std::string::npos)
      fail(origin, n, "cluster.metrics", "'" + s.metrics + "' is not HOST:PORT (e.g. 127.0.0.1:9464; port 0: any)");
  }
  if (const YAML::Node n = c["models"]) s.models = parse_models(origin, n);
  if (const YAML::Node n = c["schedulers"]) {
    if (!n.IsSequence() || n.size() == 0)
      fail(origin, n, "cluster.schedulers", "must be a list of HOST:PORT (the primary first, then the hot spares)");
    if (n.size() > kMaxClusterSchedulers)
      fail(origin, n, "cluster.schedulers",
           "at most " + std::to_string(kMaxClusterSchedulers) + " schedulers, got " + std::to_string(n.size()));
    for (const YAML::Node& e : n) {
      std::string a;
      try {
        a = e.as<std::string>();
      } catch (const YAML::Exception&) {
        fail(origin, e, "cluster.schedulers", "each entry must be a string HOST:PORT");
      }
      const std::size_t colon = a.rfind(':');
      const std::string port = colon == std::string::npos ? "" : a.substr(colon + 1);
      const bool digits = !port.empty() && port.size() <= 5 &&
                          port.find_first_not_of("0123456789") == std::string::npos;
      if (colon == std::string::npos || colon == 0 || !digits || std::stoul(port) == 0 || std::stoul(port) > 65535)
        fail(origin, e, "cluster.schedulers", "'" + a + "' is not HOST:PORT with a port in 1..65535");
      if (std::find(s.schedulers.begin(), s.schedulers.end(), a) != s.schedulers.end())
        fail(origin, e, "cluster.schedulers", "'" + a + "' is listed twice");
      s.schedulers.push_back(a);
    }
  }
  if (const YAML::Node n = c["progress_spin_us"]) {
    const double v = number(origin, n, "cluster.progress_spin_us");
    if (v < 0 || v > 10000) fail(origin, n, "cluster.progress_spin_us", "must be in [0, 10000]");
    s.progress_spin = Duration::from_us(v);
  }
  if (const YAML::Node n = c["inject_delay_us"]) {
    const double v = number(origin, n, "cluster.inject_delay_us");
    if (v < 0 || v > 10e6) fail(origin, n, "cluster.inject_delay_us", "must be in [0, 10000000]");
    s.inject_delay = Duration::from_us(v);
  }
  return s;
}

// What the scheduler process adds to the simulator's checks of the
// `subclusters:` section (symphony::config parses it).
void check_subclusters(const std::string& origin, const YAML::Node& n, const partition::SubClusterConfig& sc) {
  if (sc.spec.count > kMaxClusterSubClusters)
    fail(origin, n["count"], "subclusters.count",
         "the scheduler runs at most " + std::to_string(kMaxClusterSubClusters) + " sub-clusters, got " +
             std::to_string(sc.spec.count));
  const Duration e = sc.spec.epoch;
  if (e > Duration::zero() && e < kMinClusterEpoch)
    fail(origin, n["epoch_s"], "subclusters.epoch_s",
         "an epoch re-partitions and moves models; at least " +
             format_seconds(kMinClusterEpoch) + " s (0: place the models once), got " +
             format_seconds(e));
}

}  // namespace

ClusterConfig parse_cluster_config(const std::string& yaml_text, const std::string& origin,
                                   const std::string& base_dir, bool need_token) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    std::string where = origin;
    if (!e.mark.is_null())
      where += ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
    throw config::ConfigError(where + ": YAML syntax error: " + e.msg);
  }
  ClusterConfig cc;
  if (root.IsMap() && root["cluster"]) {
    cc.cluster = parse_section(origin, base_dir, root["cluster"]);
    cc.has_cluster_section = true;
  }
  cc.sim = config::parse_config(cut_cluster_section(yaml_text), origin, base_dir);
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
      fail(origin, at, "cluster.models." + name, "no model '" + name + "' in models: (the cluster serves: " + names + ")");
    }
  }
  if (cc.sim.subclusters) check_subclusters(origin, root["subclusters"], *cc.sim.subclusters);
  if (need_token && effective_token(cc.cluster).empty())
    throw config::ConfigError(origin +
                           ": cluster.token: a cluster needs a shared token (cluster: {token: ...} or "
                           "token_file, or SYMPHONY_CLUSTER_TOKEN in the environment)");
  return cc;
}

ClusterConfig load_cluster_config(const std::string& path, bool need_token) {
  std::ifstream f(path);
  if (!f) throw config::ConfigError(path + ": cannot open the file");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string dir = fs::path(path).parent_path().string();
  return parse_cluster_config(ss.str(), path, dir, need_token);
}

std::size_t TensorDecl::bytes() const {
  std::size_t n = dtype_bytes(dtype);
  for (std::int64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

std::size_t dtype_bytes(std::string_view dtype) {
  for (const DtypeName& d : kDtypes)
    if (d.name == dtype) return d.bytes;
  return 0;
}

Result<TensorDecl> parse_tensor_decl(std::string_view text) {
  const std::string_view t = trim(text);
  const std::size_t open = t.find('[');
  if (open == std::string_view::npos || t.empty() || t.back() != ']')
    return Status(Errc::kInvalidArgument,
                  "'" + std::string(text) + "' is not of the form dtype[d1,d2,...], e.g. float32[3,224,224]");
  TensorDecl d;
  const std::string_view dt = trim(t.substr(0, open));
  for (const DtypeName& x : kDtypes)
    if (x.name == dt) d.dtype = std::string(x.canonical);
  if (d.dtype.empty())
    return Status(Errc::kInvalidArgument,
                  "unknown dtype '" + std::string(dt) +
                      "' (float32/float, float64/double, float16/half, bfloat16, int64/long, int32/int, int16, int8, "
                      "uint8, bool)");
  std::string_view dims = t.substr(open + 1, t.size() - open - 2);
  std::uint64_t elements = 1;
  while (!trim(dims).empty()) {
    const std::size_t comma = dims.find(',');
    const std::string_view x = trim(dims.substr(0, comma));
    std::int64_t v = 0;
    const auto r = std::from_chars(x.data(), x.data() + x.size(), v);
    if (r.ec != std::errc() || r.ptr != x.data() + x.size() || v <= 0)
      return Status(Errc::kInvalidArgument,
                    "dimension '" + std::string(x) + "' in '" + std::string(text) + "' is not a positive integer");
    elements *= static_cast<std::uint64_t>(v);
    if (elements > (std::uint64_t{1} << 30))
      return Status(Errc::kInvalidArgument, "'" + std::string(text) + "' has more than 2^30 elements");
    d.shape.push_back(v);
    if (comma == std::string_view::npos) break;
    dims.remove_prefix(comma + 1);
  }
  return d;
}

std::string effective_token(const ClusterSettings& s) {
  if (const char* env = std::getenv("SYMPHONY_CLUSTER_TOKEN"); env && *env) return env;
  return s.token;
}

}  // namespace symphony::cluster
