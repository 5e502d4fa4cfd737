// Parsing the `symphony serve` configuration (yaml-cpp; no libtorch here).
#include "symphony/server/serve_config.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

namespace symphony::server {

namespace {

class Parser {
 public:
  Parser(std::string origin, std::string base_dir) : origin_(std::move(origin)), base_(std::move(base_dir)) {}

  Status error(const std::string& key, const std::string& why) const {
    return Status(Errc::kInvalidArgument, origin_ + ": key '" + key + "' " + why);
  }

  // Rejects keys outside `allowed` in map `node` (named `where`).
  Status only_keys(const YAML::Node& node, const std::string& where, std::initializer_list<const char*> allowed) {
    if (!node.IsMap()) return error(where, "must be a map");
    for (const auto& kv : node) {
      const std::string k = kv.first.as<std::string>();
      if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return k == a; }))
        return error(where.empty() ? k : where + "." + k, "is not a known setting");
    }
    return {};
  }

  template <class T>
  Status get(const YAML::Node& node, const char* key, const std::string& where, T* out) {
    const YAML::Node v = node[key];
    if (!v) return {};
    try {
      *out = v.as<T>();
    } catch (const YAML::Exception&) {
      return error(where + key, "has the wrong type");
    }
    return {};
  }

  // `recalibrate: true | false`, or a map of RecalibrationOptions (on unless
  // `enabled: false`).
  Status parse_recalibration(const YAML::Node& n, RecalibrationOptions* out) {
    if (n.IsScalar()) {
      bool on = true;
      try {
        on = n.as<bool>();
      } catch (const YAML::Exception&) {
        return error("recalibrate", "must be true, false or a map of settings");
      }
      out->enabled = on;
      return {};
    }
    if (Status s = only_keys(n, "recalibrate", {"enabled", "window", "percentile", "update_every", "min_samples",
                                               "max_rise", "max_fall", "min_scale", "max_scale"});
        !s.ok())
      return s;
    RecalibrationOptions o = RecalibrationOptions::on();
    const std::string w = "recalibrate.";
    if (Status s = get(n, "enabled", w, &o.enabled); !s.ok()) return s;
    if (Status s = get(n, "window", w, &o.window); !s.ok()) return s;
    if (Status s = get(n, "percentile", w, &o.percentile); !s.ok()) return s;
    if (Status s = get(n, "update_every", w, &o.update_every); !s.ok()) return s;
    if (Status s = get(n, "min_samples", w, &o.min_samples); !s.ok()) return s;
    if (Status s = get(n, "max_rise", w, &o.max_rise); !s.ok()) return s;
    if (Status s = get(n, "max_fall", w, &o.max_fall); !s.ok()) return s;
    if (Status s = get(n, "min_scale", w, &o.min_scale); !s.ok()) return s;
    if (Status s = get(n, "max_scale", w, &o.max_scale); !s.ok()) return s;
    if (Status s = o.validate(); !s.ok()) return error("recalibrate", "is invalid: " + s.message());
    *out = o;
    return {};
  }

  std::string resolve(const std::string& p) const {
    if (p.empty() || p == "auto" || std::filesystem::path(p).is_absolute() || base_.empty()) return p;
    return (std::filesystem::path(base_) / p).lexically_normal().string();
  }

  Result<ServeConfig> parse(const YAML::Node& root) {
    ServeConfig c;
    c.file = origin_;
    if (!root || root.IsNull()) return error("models", "is missing: the config is empty");
    if (Status s = only_keys(root, "", {"devices", "cpu_threads", "policy", "gather", "shards", "delays", "profiling",
                                        "recalibrate", "load", "models", "metrics"});
        !s.ok())
      return s;
    if (Status s = get(root, "devices", "", &c.devices); !s.ok()) return s;
    if (Status s = get(root, "cpu_threads", "", &c.cpu_threads); !s.ok()) return s;
    if (c.cpu_threads < 1) return error("cpu_threads", "must be at least 1");
    std::string policy = "deferred";
    if (Status s = get(root, "policy", "", &policy); !s.ok()) return s;
    if (auto p = parse_policy(policy); p.ok()) c.policy = *p; else return error("policy", p.status().message());
    if (Status s = check_runs_in_core(c.policy); !s.ok()) return error("policy", s.message());
    std::string gather(to_string(c.policy.gather));
    if (Status s = get(root, "gather", "", &gather); !s.ok()) return s;
    if (auto g = parse_gather(gather); g.ok()) c.policy.gather = *g; else return error("gather", g.status().message());
    if (Status s = get(root, "shards", "", &c.shards); !s.ok()) return s;
    if (c.shards < 1 || c.shards > 64) return error("shards", "must be between 1 and 64");
    if (Status s = get(root, "metrics", "", &c.metrics); !s.ok()) return s;
    if (root["metrics"] && c.metrics.find(':') == std::string::npos)
      return error("metrics", "'" + c.metrics + "' is not HOST:PORT (e.g. 127.0.0.1:9464; port 0: any free port)");

    if (const YAML::Node d = root["delays"]) {
      if (Status s = only_keys(d, "delays", {"ctrl_us", "data_us", "resp_us", "margin_us"}); !s.ok()) return s;
      double v[4] = {c.delays.ctrl.to_us(), c.delays.data.to_us(), c.delays.resp.to_us(), c.delays.safety_margin.to_us()};
      const char* keys[4] = {"ctrl_us", "data_us", "resp_us", "margin_us"};
      for (int i = 0; i < 4; ++i) {
        if (Status s = get(d, keys[i], "delays.", &v[i]); !s.ok()) return s;
        if (v[i] < 0) return error(std::string("delays.") + keys[i], "must not be negative");
      }
      c.delays = Delays{Duration::from_us(v[0]), Duration::from_us(v[1]), Duration::from_us(v[2]), Duration::from_us(v[3])};
    }
    if (const YAML::Node p = root["profiling"]) {
      if (Status s = only_keys(p, "profiling", {"latency", "max_batch", "repeats"}); !s.ok()) return s;
      std::string lat(to_string(c.profile_latency));
      if (Status s = get(p, "latency", "profiling.", &lat); !s.ok()) return s;
      auto col = profile_io::parse_profile_column(lat);
      if (!col.ok()) return error("profiling.latency", "must be median, p90 or p99");
      c.profile_latency = *col;
      if (Status s = get(p, "max_batch", "profiling.", &c.profile_max_batch); !s.ok()) return s;
      if (Status s = get(p, "repeats", "profiling.", &c.profile_repeats); !s.ok()) return s;
      if (c.profile_max_batch < 1) return error("profiling.max_batch", "must be at least 1");
      if (c.profile_repeats < 1) return error("profiling.repeats", "must be at least 1");
    }
    if (const YAML::Node r = root["recalibrate"]) {
      if (Status s = parse_recalibration(r, &c.recalibration); !s.ok()) return s;
    }
    if (const YAML::Node l = root["load"]) {
      c.has_load = true;
      if (Status s = only_keys(l, "load", {"duration_s", "warmup_s", "arrival", "seed"}); !s.ok()) return s;
      if (Status s = get(l, "duration_s", "load.", &c.duration_s); !s.ok()) return s;
      if (Status s = get(l, "warmup_s", "load.", &c.warmup_s); !s.ok()) return s;
      if (Status s = get(l, "arrival", "load.", &c.arrival); !s.ok()) return s;
      if (Status s = get(l, "seed", "load.", &c.seed); !s.ok()) return s;
      if (!(c.duration_s > 0)) return error("load.duration_s", "must be positive");
      if (!(c.warmup_s >= 0) || c.warmup_s >= c.duration_s) return error("load.warmup_s", "must be in [0, duration_s)");
      Result<ArrivalProcess> arrival = parse_arrival_process(c.arrival);
      if (!arrival.ok()) return error("load.arrival", arrival.status().message());
      c.arrival_process = *arrival;
      c.gamma_shape = arrival->shape;
    }
    const YAML::Node models = root["models"];
    if (!models || !models.IsSequence() || models.size() == 0) return error("models", "must be a non-empty list");
    std::set<std::string> names;
    for (std::size_t i = 0; i < models.size(); ++i) {
      const YAML::Node m = models[i];
      const std::string where = "models[" + std::to_string(i) + "]";
      if (Status s = only_keys(m, where, {"name", "path", "input", "inputs", "slo_ms", "max_batch", "rate",
                                          "profile", "alpha_ms", "beta_ms"});
          !s.ok())
        return s;
      ServeModelConfig mc;
      const std::string w = where + ".";
      if (Status s = get(m, "name", w, &mc.name); !s.ok()) return s;
      if (mc.name.empty()) return error(w + "name", "is missing");
      if (!names.insert(mc.name).second) return error(w + "name", "'" + mc.name + "' is used twice");
      if (Status s = get(m, "path", w, &mc.path); !s.ok()) return s;
      mc.path = resolve(mc.path);
      if (m["input"] && m["inputs"]) return error(w + "input", "and 'inputs' are both given; use one");
      if (m["input"]) {
        std::string one;
        if (Status s = get(m, "input", w, &one); !s.ok()) return s;
        mc.inputs = {one};
      }
      if (Status s = get(m, "inputs", w, &mc.inputs); !s.ok()) return s;
      double slo_ms = 0, alpha = -1, beta = -1;
      if (Status s = get(m, "slo_ms", w, &slo_ms); !s.ok()) return s;
      if (!(slo_ms > 0)) return error(w + "slo_ms", "must be positive");
      mc.slo = Duration::from_ms(slo_ms);
      if (Status s = get(m, "max_batch", w, &mc.max_batch); !s.ok()) return s;
      if (mc.max_batch < 1 || mc.max_batch > 4096) return error(w + "max_batch", "must be between 1 and 4096");
      if (Status s = get(m, "rate", w, &mc.rate); !s.ok()) return s;
      if (!(mc.rate >= 0) || !std::isfinite(mc.rate)) return error(w + "rate", "must not be negative");
      if (Status s = get(m, "profile", w, &mc.profile); !s.ok()) return s;
      mc.profile = resolve(mc.profile);
      if (Status s = get(m, "alpha_ms", w, &alpha); !s.ok()) return s;
      if (Status s = get(m, "beta_ms", w, &beta); !s.ok()) return s;
      if (m["alpha_ms"] || m["beta_ms"]) {
        if (!(alpha >= 0) || !(beta >= 0) || alpha + beta <= 0)
          return error(w + "alpha_ms", "and beta_ms must both be given, not negative, and not both zero");
        mc.alpha = Duration::from_ms(alpha);
        mc.beta = Duration::from_ms(beta);
      } else {
        if (mc.path.empty()) return error(w + "path", "is missing (or give alpha_ms and beta_ms for emulated devices)");
        if (mc.inputs.empty())
          return error(w + "input", "is missing: give the input spec, e.g. input: float32[3,64,64]");
      }
      c.models.push_back(std::move(mc));
    }
    return c;
  }

 private:
  std::string origin_, base_;
};

}  // namespace

Result<ServeConfig> parse_serve_config(const std::string& yaml, const std::string& origin, const std::string& base_dir) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    return Status(Errc::kInvalidArgument, origin + ": " + e.what());
  }
  try {
    return Parser(origin, base_dir).parse(root);
  } catch (const YAML::Exception& e) {
    return Status(Errc::kInvalidArgument, origin + ": " + e.what());
  }
}

Result<ServeConfig> load_serve_config(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return Status(Errc::kNotFound, "config file " + path + " not found");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return Status(Errc::kInvalidArgument, path + ": " + e.what());
  }
  const std::string base = std::filesystem::path(path).parent_path().string();
  try {
    return Parser(path, base).parse(root);
  } catch (const YAML::Exception& e) {
    return Status(Errc::kInvalidArgument, path + ": " + e.what());
  }
}

}  // namespace symphony::server
